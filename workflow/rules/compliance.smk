# Stage 4b: compliance tests from the round's table (TEST06 for llama2: output
# consistency). Each is a LoadGen performance run with the test's audit.config in its
# own working directory, then our verification writing the TEST0x folder. A test judged
# against the performance run (TEST04) is measured together with it (rule measurement_pair).


rule compliance_run:
    input:
        model=serving_dir,
        dataset=dataset_dir_of,
        screen=screen_of,
        user_conf=PATHS["user_conf"],
    output:
        run=directory(PATHS["compliance_run"]),
    log:
        "logs/runs/{system}/{benchmark}/{scenario}/{test}.log",
    retries: RUN_RETRIES
    container:
        system_container
    # A test judged on speed (TEST01) is a measurement; TEST06/07/09 check outputs.
    threads: run_threads(cluster_cpus=16, is_measurement=compliance_judges_speed)
    resources:
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=16000,
        runtime=lambda wc, attempt: 60 * attempt,
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
        dataset_file=lambda wc: PLAN.dataset_file(wc.benchmark, wc.test),
        # gpt-oss: the harmony reasoning effort the file's prompts must ask for.
        prompt_check=lambda wc: PLAN.prompt_check(wc.benchmark, wc.test),
        loadgen_model=lambda wc: PLAN.loadgen_model(wc.benchmark, wc.scenario),
        loadgen_scenario=lambda wc: PLAN.loadgen_scenario(wc.scenario),
        performance_sample_count=lambda wc: PLAN.performance_sample_count(wc.benchmark),
        generation=lambda wc: PLAN.generation_params(wc.benchmark, "performance"),
        engine=lambda wc: PLAN.run_engine(wc.system, wc.benchmark, wc.scenario),
        audit_config=lambda wc: PLAN.audit_config(wc.test, wc.benchmark, wc.scenario),
    script:
        f"{SCRIPTS}/loadgen_run.py"


rule measurement_pair:
    # TEST04 judges the audited run's speed against the performance run's, so both are one
    # measurement: run back to back in one job, and measured again (both runs, every attempt
    # kept) where both were VALID but the host's speed moved between them (up to 20-30% on a
    # shared 2-core VM, bench/README.md): the compliance section of config/README.md.
    input:
        model=serving_dir,
        dataset=dataset_dir_of,
        screen=screen_of,
        user_conf=PATHS["user_conf"],
    output:
        performance=directory(PATHS["pair_performance"]),
        audited=directory(PATHS["pair_audited"]),
        attempts=directory(PATHS["pair_attempts"]),
    log:
        "logs/runs/{system}/{benchmark}/{scenario}/{test}_pair.log",
    retries: RUN_RETRIES
    container:
        system_container
    threads: machine_threads(cluster_cpus=16)
    resources:
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=16000,
        # Minutes: a performance run and a compliance run per attempt.
        runtime=lambda wc, attempt: (120 + 60) * PLAN.compliance_settings["measurement_attempts"] * attempt,
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
        loadgen_model=lambda wc: PLAN.loadgen_model(wc.benchmark, wc.scenario),
        loadgen_scenario=lambda wc: PLAN.loadgen_scenario(wc.scenario),
        performance_sample_count=lambda wc: PLAN.performance_sample_count(wc.benchmark),
        generation=lambda wc: PLAN.generation_params(wc.benchmark, "performance"),
        engine=lambda wc: PLAN.run_engine(wc.system, wc.benchmark, wc.scenario),
        # Each run's file (and gpt-oss's harmony check); the audited run's audit.config.
        performance=lambda wc: {
            "dataset_file": PLAN.dataset_file(wc.benchmark, "performance"),
            "prompt_check": PLAN.prompt_check(wc.benchmark, "performance"),
        },
        audited=lambda wc: {
            "dataset_file": PLAN.dataset_file(wc.benchmark, wc.test),
            "prompt_check": PLAN.prompt_check(wc.benchmark, wc.test),
            "audit_config": PLAN.audit_config(wc.test, wc.benchmark, wc.scenario),
        },
        rules_test=lambda wc: PLAN.compliance_test(wc.test, wc.benchmark),
        attempts=PLAN.compliance_settings["measurement_attempts"],
        noise_ceiling=PLAN.compliance_settings["noise_ceiling"],
    script:
        f"{SCRIPTS}/measurement_pair.py"


rule compliance_verify:
    input:
        run=lambda wc: PLAN.compliance_run_dir(wc.system, wc.benchmark, wc.scenario, wc.test),
        model=serving_dir,
        dataset=dataset_dir_of,
        accuracy_datasets=accuracy_datasets_of,
        tokenizer=tokenizer_dir_of,
        # TEST04 compares with the normal performance run (the packaged repeat, which its
        # measurement pair made); at test scale TEST09's band is drawn around that run's output
        # length.
        performance=lambda wc: (
            [PLAN.packaged_run_dir(wc.system, wc.benchmark, wc.scenario)]
            if PLAN.compliance_test(wc.test, wc.benchmark).get("needs_performance_run")
            or (PLAN.test_scale and PLAN.compliance_test(wc.test, wc.benchmark).get("test_scale_reference"))
            else []
        ),
    output:
        verdict=directory(PATHS["compliance"]),
    log:
        "logs/compliance/{system}/{benchmark}/{scenario}/{test}.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        rules_test=lambda wc: PLAN.compliance_test(wc.test, wc.benchmark),
        # TEST07 scores the run with the benchmark's evaluator on the file it ran on.
        dataset_file=lambda wc: PLAN.dataset_file(wc.benchmark, wc.test),
        evaluator=lambda wc: PLAN.facts(wc.benchmark).accuracy["evaluator"],
        accuracy_rules=lambda wc: PLAN.accuracy_rules(wc.benchmark),
    script:
        f"{SCRIPTS}/compliance_verify.py"
