# Stage 4: accuracy.txt exactly as the MLCommons checker parses it, judged against the
# round's targets or against the unquantized model's measured score.


rule accuracy_eval:
    input:
        run="results/runs/{system}/{benchmark}/{scenario}/accuracy",
        dataset=dataset_dir_of,
        tokenizer=tokenizer_dir_of,
        reference=reference_accuracy_of,
    output:
        txt="results/accuracy/{system}/{benchmark}/{scenario}/accuracy.txt",
        json="results/accuracy/{system}/{benchmark}/{scenario}/accuracy.json",
    params:
        dataset_file=lambda wc: PLAN.dataset_file(wc.benchmark),
        evaluator=lambda wc: PLAN.facts(wc.benchmark).accuracy["evaluator"],
        targets=lambda wc: PLAN.accuracy_targets(wc.benchmark),
    log:
        "logs/accuracy/{system}/{benchmark}/{scenario}.log",
    threads: workflow.cores
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        f"{SCRIPTS}/accuracy_eval.py"
