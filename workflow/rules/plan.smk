# The plan view as a workflow target (`snakemake -c1 plan_view`): jobs, wall time,
# GPU-hours and disk per stage estimated from the config, written to results/plan/. The same
# numbers as `mlperf-repro plan --configfile <config>`; not part of `all`.
rule plan_view:
    output:
        txt=PATHS["plan_txt"],
        json=PATHS["plan_json"],
    log:
        "logs/plan/plan_view.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        # The estimate itself is the param: a config change that moves a number rewrites it.
        text=lambda wc: plan_view().render(),
        json=lambda wc: plan_view().to_json(),
    script:
        f"{SCRIPTS}/plan_view.py"
