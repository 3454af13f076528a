# Stage 4: accuracy.txt exactly as the MLCommons checker parses it, judged against the
# round's targets or against the unquantized model's measured score.


rule accuracy_eval:
    input:
        run=path("run", mode="accuracy"),
        dataset=dataset_dir_of,
        accuracy_datasets=accuracy_datasets_of,
        tokenizer=tokenizer_dir_of,
        reference=reference_accuracy_of,
        reference_outputs=reference_outputs_of,
    output:
        txt=PATHS["accuracy_txt"],
        json=PATHS["accuracy_json"],
        extras=directory(PATHS["accuracy_extras"]),
    log:
        "logs/accuracy/{system}/{benchmark}/{scenario}.log",
    conda:
        WORKFLOW_ENV
    threads: machine_threads(cluster_cpus=2)
    resources:
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=4000,
        runtime=lambda wc, attempt: 60 * attempt,
    params:
        dataset_file=lambda wc: PLAN.dataset_file(wc.benchmark, "accuracy"),
        evaluator=lambda wc: PLAN.facts(wc.benchmark).accuracy["evaluator"],
        accuracy_rules=lambda wc: PLAN.accuracy_rules(wc.benchmark),
        targets=lambda wc: PLAN.accuracy_targets(wc.benchmark),
    script:
        f"{SCRIPTS}/accuracy_eval.py"
