# Scaling study (config key `scaling_study`): one benchmark's performance runs on 1, 2, ...
# N of a system's endpoints, then a table and a plot of throughput and efficiency.


rule scaling_user_conf:
    input:
        # target_qps: auto: the scenario's find-performance result, scaled to n of N endpoints.
        find_performance=find_performance_of,
    output:
        PATHS["scaling_user_conf"],
    log:
        "logs/scaling/{system}/{benchmark}/{scenario}/n{n_endpoints}.user_conf.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        request=lambda wc: PLAN.scaling_user_conf_request(wc.system, wc.benchmark, wc.scenario, int(wc.n_endpoints)),
    script:
        f"{SCRIPTS}/user_conf.py"


rule scaling_run:
    input:
        model=serving_dir,
        dataset=dataset_dir_of,
        screen=screen_of,
        user_conf=PATHS["scaling_user_conf"],
    output:
        run=directory(PATHS["scaling_run"]),
    log:
        "logs/scaling/{system}/{benchmark}/{scenario}/n{n_endpoints}.log",
    container:
        system_container
    threads: machine_threads(cluster_cpus=16)
    resources:
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=16000,
        runtime=lambda wc, attempt: 120 * attempt,
        # None, not 0, on CPU hosts: the Kubernetes plugin turns any gpu entry into a GPU
        # request and a GPU-node toleration.
        gpu=lambda wc: PLAN.accelerators(wc.system, int(wc.n_endpoints)) or None,
        # launch: slurm: the job spans the nodes of its first n servers and starts a server
        # per task itself (mpi makes the plugin leave srun to the job); None elsewhere.
        nodes=lambda wc: PLAN.nodes(wc.system, int(wc.n_endpoints)),
        tasks=lambda wc: PLAN.server_tasks(wc.system, int(wc.n_endpoints)),
        mpi=lambda wc: "srun" if PLAN.server_tasks(wc.system) else None,
        tasks_per_gpu=lambda wc: 0 if PLAN.server_tasks(wc.system) else None,
    params:
        # The rules table's task: its dataset reader and system under test.
        task=lambda wc: PLAN.task(wc.benchmark),
        # The image (provenance) and the GPU screen the job applies.
        container_image=system_image,
        gpu_screening=lambda wc: PLAN.job_screening(wc.system),
        dataset_file=lambda wc: PLAN.dataset_file(wc.benchmark),
        prompt_check=lambda wc: PLAN.prompt_check(wc.benchmark),
        loadgen_model=lambda wc: PLAN.loadgen_model(wc.benchmark, wc.scenario),
        loadgen_scenario=lambda wc: PLAN.loadgen_scenario(wc.scenario),
        performance_sample_count=lambda wc: PLAN.performance_sample_count(wc.benchmark),
        generation=lambda wc: PLAN.generation_params(wc.benchmark, "performance"),
        engine=lambda wc: PLAN.scaling_engine(wc.system, int(wc.n_endpoints)),
    script:
        f"{SCRIPTS}/loadgen_run.py"


rule scaling_report:
    input:
        lambda wc: [PLAN.scaling_run_dir(wc.system, wc.benchmark, s, n) for s, n in PLAN.scaling_jobs()],
    output:
        csv=PATHS["scaling_csv"],
        md=PATHS["scaling_md"],
        svg=report(
            PATHS["scaling_svg"],
            caption="../report/scaling.rst",
            category="5. Scaling study",
            labels={"system": "{system}", "benchmark": "{benchmark}"},
        ),
    log:
        "logs/scaling/{system}/{benchmark}/report.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        points=lambda wc: PLAN.scaling_points(),
        title=lambda wc: f"{wc.system} / {wc.benchmark}",
    script:
        f"{SCRIPTS}/scaling_report.py"
