# Compare: a reference submission against partners' (config key `compare`), the same as
# `python -m mlperf_repro compare`. Reports: results/compare/<reference>_vs_<partner>.{md,csv,html}.


rule compare:
    input:
        compare_inputs(config),
    output:
        compare_outputs(config),
    log:
        "logs/compare/compare.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        reference=lambda wc: compare_specs(config)[0],
        partners=lambda wc: compare_specs(config)[1],
        settings=lambda wc: config.get("compare", {}),
    script:
        f"{SCRIPTS}/compare.py"
