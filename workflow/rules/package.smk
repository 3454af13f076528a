# Stage 5: the official v6.0 tree and its deterministic tarball. The tree's root is
# results/package/submission/: Snakemake marks a directory output with a hidden
# timestamp file, which must not sit inside what is submitted.


rule package:
    input:
        runs=PLAN.run_outputs(),
        # repeats: N with packaged_repeat k > 1: that repeat becomes performance/run_1.
        packaged=PLAN.packaged_repeat_outputs(),
        user_confs=[PLAN.user_conf_path(j.system, j.benchmark, j.scenario) for j in PLAN.jobs],
        accuracy=PLAN.accuracy_outputs(),
        compliance=PLAN.compliance_outputs(),
        quantized=[PLAN.quantized_dir(m, r) for m, r in PLAN.quantized_models],
    output:
        package=directory(PATHS["package"]),
    log:
        "logs/package/package.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        config=PLAN.submission_config(),
        code_root=workflow.basedir,
    script:
        f"{SCRIPTS}/package.py"


rule tarball:
    input:
        package=PATHS["package"],
    output:
        PATHS["tarball"],
    log:
        "logs/package/tarball.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    script:
        f"{SCRIPTS}/tarball.py"
