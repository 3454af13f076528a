# One config in, one MLPerf Inference submission out. This file only wires stages
# together; the logic lives in src/mlperf_repro, the stages in workflow/rules/.
from snakemake.utils import min_version

min_version("9.20")


# The embedded default config, unless --configfile names the one config to use (it
# replaces the default rather than being merged into it, so no stray key survives).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/acquire.smk"
include: "workflow/rules/quantize.smk"
include: "workflow/rules/screen.smk"
include: "workflow/rules/find_performance.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/accuracy.smk"
include: "workflow/rules/compliance.smk"
include: "workflow/rules/package.smk"
include: "workflow/rules/check.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/scaling.smk"
include: "workflow/rules/plan.smk"


rule all:
    default_target: True
    input:
        # The per-scenario runs are targets too: deleting one scenario's outputs reruns
        # exactly that scenario and what depends on it.
        PLAN.run_outputs(),
        PLAN.repeat_outputs(),
        PLAN.accuracy_outputs(),
        PLAN.compliance_outputs(),
        PATHS["tarball"],
        PATHS["check_txt"],
        PATHS["summary_md"],
        PATHS["official_summary_csv"],
        report_outputs(),
        compare_outputs(config),
        PLAN.scaling_outputs(),


onsuccess:
    stop_shared_server_jobs()
    print_summary(PATHS["summary_md"], report_outputs())


onerror:
    stop_shared_server_jobs()
