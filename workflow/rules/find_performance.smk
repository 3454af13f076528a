# target_qps: auto: before a scenario's runs, short real LoadGen runs on the real backend
# measure this machine (Offline, SingleStream: its rate; Server, Interactive: the highest rate
# that meets the latency limits) and the scenario's user.conf gets the target chosen from it.


rule find_performance:
    input:
        model=serving_dir,
        dataset=dataset_dir_of,
        screen=screen_of,
        # A Server/Interactive search without start_qps starts from the Offline pass's rate.
        offline=offline_pass_of,
    output:
        result=PATHS["find_performance"],
    log:
        "logs/find_performance/{system}/{benchmark}/{scenario}.log",
    # Before the light jobs, as acquire and quantize: the scenario's user.conf, and so each of
    # its runs (accuracy runs too, which pair up on the cores), waits for the pass.
    priority: 40
    container:
        system_container
    # A measurement owns the machine: no other job may share its cores.
    threads: machine_threads(cluster_cpus=16)
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
        # The short runs' folders: not an output, so that a failed search keeps them to be read.
        runs_dir=lambda wc: PLAN.find_performance_runs_dir(wc.system, wc.benchmark, wc.scenario),
        # What the short runs measure with: the scenario's settings, the search's settings
        # (find_performance section, start_qps), the latency limits. Editing one reruns the pass.
        search=lambda wc: PLAN.find_performance_request(wc.system, wc.benchmark, wc.scenario),
        # As the scenario's performance runs (rule loadgen_run).
        task=lambda wc: PLAN.task(wc.benchmark),
        container_image=system_image,
        gpu_screening=lambda wc: PLAN.job_screening(wc.system),
        dataset_file=lambda wc: PLAN.dataset_file(wc.benchmark, "performance"),
        prompt_check=lambda wc: PLAN.prompt_check(wc.benchmark, "performance"),
        loadgen_model=lambda wc: PLAN.loadgen_model(wc.benchmark, wc.scenario),
        loadgen_scenario=lambda wc: PLAN.loadgen_scenario(wc.scenario),
        performance_sample_count=lambda wc: PLAN.performance_sample_count(wc.benchmark),
        generation=lambda wc: PLAN.generation_params(wc.benchmark, "performance"),
        engine=lambda wc: PLAN.engine(wc.system),
    script:
        f"{SCRIPTS}/find_performance.py"
