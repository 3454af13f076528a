# GPU screening before the runs: device count, memory and a timed matmul per GPU of the
# run host, judged against the host's median and the config (systems.<s>.gpu_screening).
# Only systems with screening enabled and accelerators on the run host have this job; their
# LoadGen runs take its result as input and run on the GPUs it passed.


rule screen_gpus:
    output:
        PATHS["screen"],
    log:
        "logs/screen/{system}.log",
    container:
        system_container
    resources:
        gpu=lambda wc: PLAN.accelerators(wc.system),
        runtime=15,
    params:
        screening=lambda wc: PLAN.screening(wc.system),
        expected=lambda wc: PLAN.expected_devices(wc.system),
        env=lambda wc: PLAN.engine(wc.system).get("env", {}),
    script:
        f"{SCRIPTS}/screen_gpus.py"
