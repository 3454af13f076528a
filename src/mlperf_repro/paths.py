"""Where the workflow writes what: one table of path patterns, relative to its working directory.

The rules of workflow/rules/ take their input and output patterns from :data:`PATHS` (the
``{wildcards}`` are Snakemake's), and :class:`mlperf_repro.plan.Plan`'s path helpers fill the
same patterns in with :func:`path`, so every output path is written exactly once.
Foundation layer: no imports from the package.
"""

from __future__ import annotations

import re

PATHS: dict[str, str] = {
    # Stage 1: acquired models and datasets, and the record of each acquisition.
    "model": "resources/models/{model}",
    "dataset": "resources/datasets/{dataset}",
    "acquire_record": "results/acquire/{kind}/{name}.json",
    # Stage 2: quantized checkpoints.
    "quantized": "results/models/{model}-{recipe}",
    "emulated": "results/models/{model}-{recipe}-emulated",
    # GPU screening.
    "screen": "results/screen/{system}.json",
    # Stage 3: LoadGen runs; target_qps auto measures the machine first (its short runs beside).
    "find_performance": "results/find_performance/{system}/{benchmark}/{scenario}.json",
    "find_performance_runs": "results/find_performance/{system}/{benchmark}/{scenario}",
    "user_conf": "results/runs/{system}/{benchmark}/{scenario}/user.conf",
    "run": "results/runs/{system}/{benchmark}/{scenario}/{mode}",
    # repeats: N - the performance test's repeats 2..N beside it (the performance run is repeat 1).
    "repeat_run": "results/runs/{system}/{benchmark}/{scenario}/performance_run_{repeat}",
    "reference_accuracy": "results/reference/{system}/{benchmark}/accuracy.json",
    # The reference run's outputs the open-division metrics compare with (text-to-video: its mp4s).
    "reference_outputs": "results/reference/{system}/{benchmark}/outputs",
    # Stage 4: accuracy.
    "accuracy": "results/accuracy/{system}/{benchmark}/{scenario}",
    "accuracy_txt": "results/accuracy/{system}/{benchmark}/{scenario}/accuracy.txt",
    "accuracy_json": "results/accuracy/{system}/{benchmark}/{scenario}/accuracy.json",
    # What the evaluator adds to the package's accuracy folder (text-to-video: videos/).
    "accuracy_extras": "results/accuracy/{system}/{benchmark}/{scenario}/extras",
    # Stage 4b: compliance tests (the run lies next to the scenario's performance run).
    "compliance_run": "results/runs/{system}/{benchmark}/{scenario}/{test}",
    # A test judged against the performance run (TEST04) is measured with it as one pair
    # (rule measurement_pair): the pair's performance run, audited run and every attempt.
    "pair_performance": "results/runs/{system}/{benchmark}/{scenario}/{test}_pair/performance",
    "pair_audited": "results/runs/{system}/{benchmark}/{scenario}/{test}_pair/{test}",
    "pair_attempts": "results/runs/{system}/{benchmark}/{scenario}/{test}_pair/attempts",
    "compliance": "results/compliance/{system}/{benchmark}/{scenario}/{test}",
    # Stage 5: the submission tree and its tarball.
    "package": "results/package",
    "failed_results": "results/package/failed_results.json",
    "tarball": "results/submission.tar.gz",
    # Stage 6: checks.
    "check_txt": "results/check/report.txt",
    "check_json": "results/check/report.json",
    "preflight": "results/check/preflight.txt",
    # The lock check at the workflow's start, which every run copies into its provenance.
    "lock_check": "results/check/lock.json",
    # Stage 7: reports.
    "summary_csv": "results/report/summary.csv",
    "summary_md": "results/report/summary.md",
    # The summary's rows and each repeated scenario's run-to-run spread, for scripts and plots.
    "summary_json": "results/report/summary.json",
    "official_summary_csv": "results/report/summary_official.csv",
    "final_report_xlsx": "results/report/final_report.xlsx",
    # Scaling study.
    "scaling_user_conf": "results/scaling/{system}/{benchmark}/{scenario}/n{n_endpoints}.user.conf",
    "scaling_run": "results/scaling/{system}/{benchmark}/{scenario}/n{n_endpoints}",
    "scaling_csv": "results/scaling/{system}/{benchmark}/scaling.csv",
    "scaling_md": "results/scaling/{system}/{benchmark}/scaling.md",
    "scaling_svg": "results/scaling/{system}/{benchmark}/scaling.svg",
    # The plan view.
    "plan_txt": "results/plan/plan.txt",
    "plan_json": "results/plan/plan.json",
}

_FIELD = re.compile(r"\{(\w+)\}")


def path(key: str, **values: object) -> str:
    """``PATHS[key]`` with the given wildcards filled in; the others stay ``{wildcards}``
    (``path("acquire_record", kind="models", name="{model}")`` is a rule pattern)."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), PATHS[key])
