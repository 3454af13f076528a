# Stage 3: LoadGen runs, one test per process. Each system x benchmark x scenario gets a
# generated user.conf and a performance and an accuracy run; a scenario with repeats: N
# runs its performance test N - 1 more times (rule loadgen_repeat).


rule user_conf:
    input:
        # target_qps: auto: the target its find-performance pass chose (nothing otherwise).
        find_performance=find_performance_of,
    output:
        PATHS["user_conf"],
    log:
        "logs/runs/{system}/{benchmark}/{scenario}/user_conf.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        # The settings themselves are the param: changing one in the config reruns exactly
        # the affected scenario.
        request=lambda wc: PLAN.user_conf_request(wc.system, wc.benchmark, wc.scenario),
    script:
        f"{SCRIPTS}/user_conf.py"


rule loadgen_run:
    input:
        model=serving_dir,
        dataset=dataset_dir_of,
        screen=screen_of,
        user_conf=PATHS["user_conf"],
    output:
        run=directory(PATHS["run"]),
    log:
        "logs/runs/{system}/{benchmark}/{scenario}/{mode}.log",
    retries: RUN_RETRIES
    container:
        system_container
    # A measurement owns the machine: no other job may share its cores.
    threads: run_threads(cluster_cpus=16, is_measurement=is_performance_run)
    resources:
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=16000,
        runtime=lambda wc, attempt: 120 * attempt,
        # None, not 0, on CPU hosts: the Kubernetes plugin turns any gpu entry into a GPU
        # request and a GPU-node toleration.
        gpu=lambda wc: PLAN.accelerators(wc.system) or None,
        # launch: slurm: the job spans the allocation and starts a server per task itself
        # (mpi makes the plugin leave srun to the job); None elsewhere.
        nodes=lambda wc: PLAN.nodes(wc.system),
        tasks=lambda wc: PLAN.server_tasks(wc.system),
        mpi=lambda wc: "srun" if PLAN.server_tasks(wc.system) else None,
        tasks_per_gpu=lambda wc: 0 if PLAN.server_tasks(wc.system) else None,
    params:
        # The rules table's task: its dataset reader and system under test.
        task=lambda wc: PLAN.task(wc.benchmark),
        # The image (provenance) and the GPU screen the job applies.
        container_image=system_image,
        gpu_screening=lambda wc: PLAN.job_screening(wc.system),
        dataset_file=lambda wc: PLAN.dataset_file(wc.benchmark, run_mode(wc)),
        # gpt-oss: the harmony reasoning effort the file's prompts must ask for.
        prompt_check=lambda wc: PLAN.prompt_check(wc.benchmark, run_mode(wc)),
        loadgen_model=lambda wc: PLAN.loadgen_model(wc.benchmark, wc.scenario),
        loadgen_scenario=lambda wc: PLAN.loadgen_scenario(wc.scenario),
        performance_sample_count=lambda wc: PLAN.performance_sample_count(wc.benchmark),
        generation=lambda wc: PLAN.generation_params(wc.benchmark, run_mode(wc)),
        engine=lambda wc: PLAN.run_engine(wc.system, wc.benchmark, wc.scenario),
    script:
        f"{SCRIPTS}/loadgen_run.py"


# repeats: N - repeat k (2..N) of a scenario's performance test: the same job, user.conf and
# engine in a fresh LoadGen process, beside the performance run (which is repeat 1).
use rule loadgen_run as loadgen_repeat with:
    output:
        run=directory(PATHS["repeat_run"]),
    log:
        "logs/runs/{system}/{benchmark}/{scenario}/performance_run_{repeat}.log",


rule reference_accuracy:
    # The unquantized model's own score on this system: the baseline a stand-in
    # model's quantized accuracy is judged against (accuracy_target: measured); for
    # text-to-video also its videos, which open_accuracy's fidelity metrics compare with.
    input:
        model=lambda wc: PLAN.model_dir(PLAN.benchmark_cfg(wc.benchmark)["model"]),
        dataset=dataset_dir_of,
        screen=screen_of,
    output:
        record=PATHS["reference_accuracy"],
        # What open_accuracy's fidelity metrics compare with (text-to-video: the unquantized
        # pipeline's mp4s); empty for the other tasks.
        outputs=directory(PATHS["reference_outputs"]),
    log:
        "logs/reference/{system}/{benchmark}.log",
    container:
        system_container
    threads: run_threads(cluster_cpus=16, is_measurement=never)
    resources:
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=16000,
        runtime=lambda wc, attempt: 120 * attempt,
        # None, not 0, on CPU hosts: the Kubernetes plugin turns any gpu entry into a GPU
        # request and a GPU-node toleration.
        gpu=lambda wc: PLAN.accelerators(wc.system) or None,
    params:
        # The image (provenance) and the GPU screen the job applies.
        container_image=system_image,
        gpu_screening=lambda wc: PLAN.job_screening(wc.system),
        dataset_file=lambda wc: PLAN.dataset_file(wc.benchmark, "accuracy"),
        prompt_check=lambda wc: PLAN.prompt_check(wc.benchmark, "accuracy"),
        generation=lambda wc: PLAN.generation_params(wc.benchmark, "accuracy"),
        engine=lambda wc: PLAN.engine(wc.system),
        evaluator=lambda wc: PLAN.facts(wc.benchmark).accuracy["evaluator"],
        accuracy_rules=lambda wc: PLAN.accuracy_rules(wc.benchmark),
        # open_accuracy: the reference is scored by those metrics instead of the round's.
        open_metrics=lambda wc: PLAN.accuracy_targets(wc.benchmark).get("open_metrics"),
    script:
        f"{SCRIPTS}/reference_accuracy.py"
