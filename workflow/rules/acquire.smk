# Stage 1: models and datasets into resources/, each verified against sha256 checksums
# (or, for the builtin demo, built deterministically and hashed).


rule acquire_model:
    output:
        model=directory(PATHS["model"]),
        record=path("acquire_record", kind="models", name="{model}"),
    log:
        "logs/acquire/models/{model}.log",
    # First among the jobs ready with it, as quantize: everything of its model waits for it.
    priority: 50
    conda:
        WORKFLOW_ENV
    threads: machine_threads(cluster_cpus=2)
    resources:
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=4000,
        runtime=lambda wc, attempt: 30 * attempt,
    params:
        entry=lambda wc: PLAN.acquire_entry("models", wc.model),
    script:
        f"{SCRIPTS}/acquire_model.py"


rule acquire_dataset:
    input:
        # A builtin dataset is tokenised with its builtin model's tokenizer.
        tokenizer=lambda wc: (
            [PLAN.model_dir(config["datasets"][wc.dataset]["builtin"]["model"])]
            if (config["datasets"][wc.dataset].get("builtin") or {}).get("model")
            and config["datasets"][wc.dataset]["source"].startswith("builtin:")
            else []
        ),
    output:
        dataset=directory(PATHS["dataset"]),
        record=path("acquire_record", kind="datasets", name="{dataset}"),
    log:
        "logs/acquire/datasets/{dataset}.log",
    priority: 50
    conda:
        WORKFLOW_ENV
    resources:
        mem_mb=2000,
        runtime=lambda wc, attempt: 30 * attempt,
    params:
        entry=lambda wc: PLAN.acquire_entry("datasets", wc.dataset),
        # A builtin stand-in gets the files (and accuracy repeats) of the benchmark it serves.
        build=lambda wc: PLAN.dataset_build_args(wc.dataset),
    script:
        f"{SCRIPTS}/acquire_dataset.py"
