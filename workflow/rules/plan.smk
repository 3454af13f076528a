# The plan view as a workflow target (`snakemake -c1 plan_view`): jobs, wall time,
# GPU-hours and disk per stage estimated from the config, written to results/plan/. The same
# numbers as `mlperf-repro plan --configfile <config>`; not part of `all`.
import functools

from mlperf_repro.config import load_yaml as _load_yaml
from mlperf_repro.estimate import estimate_plan


def estimate_keys_set_by_user():
    """The `estimate` keys the config files set (the rest are schema defaults)."""
    keys = set()
    for path in workflow.configfiles:
        raw = _load_yaml(path)
        section = raw.get("estimate") if isinstance(raw, dict) else None
        keys |= set(section) if isinstance(section, dict) else set()
    return keys


@functools.cache
def plan_view():
    # Only when the target is asked for: other runs never pay for (or fail on) the estimate.
    return estimate_plan(config, estimate_keys_set_by_user())


rule plan_view:
    output:
        txt="results/plan/plan.txt",
        json="results/plan/plan.json",
    params:
        # The estimate itself is the param: a config change that moves a number rewrites it.
        text=lambda wc: plan_view().render(),
        json=lambda wc: plan_view().to_json(),
    log:
        "logs/plan/plan_view.log",
    localrule: True
    script:
        f"{SCRIPTS}/plan_view.py"
