"""The measurement pair: a scenario's performance run and the compliance test judged against it
(TEST04: the audited run may not be much faster than the performance run), measured back to back
in one job, each LoadGen test in its own process.

Why one job: the two runs are compared on speed, and a host's speed drifts between runs (a shared
2-core VM: 20-30% between two 10-second runs a few seconds apart, bench/README.md). Where both
runs were VALID and the ratio broke the limit by no more than that noise can explain (below
``noise_ceiling``), the job measures the pair again, both runs, up to ``attempts`` times in all,
and keeps every attempt's logs and scores. A failure the noise cannot explain stands at once: a
SUT that serves repeated samples from a cache is many times faster, and a cache that outlives a
run would also speed up the next attempt's performance run, so it must not get one. A pair whose
runs were not both VALID is not measured again either (that is not the machine's noise).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..loadgen_logs import read_detail
from .compliance import VERIFIERS, VerifyInputs
from .runs import loadgen_job_in_child

DETAIL = "mlperf_log_detail.txt"


def _validity(run_dir: Path) -> str:
    detail = run_dir / DETAIL
    if not detail.is_file():
        raise UserError(f"{detail} is missing: the LoadGen run did not finish")
    return str(read_detail(detail).get("result_validity"))


def measurement_pair_job(
    *,
    run: dict[str, Any],
    performance: dict[str, Any],
    audited: dict[str, Any],
    test: str,
    scenario: str,
    rules_test: dict[str, Any],
    attempts: int,
    noise_ceiling: float,
    performance_out: str,
    audited_out: str,
    attempts_out: str,
    run_child: Callable[[dict[str, Any], Path], None] | None = None,
) -> dict[str, Any]:
    """Measure the pair into ``performance_out`` and ``audited_out`` (the last attempt's runs)
    and record every attempt in ``attempts_out``/attempts.json (earlier attempts' runs beside it).

    ``run``: :func:`mlperf_repro.stages.runs.loadgen_job`'s keyword arguments common to both
    runs (model, dataset folder, user.conf, engine, ...); ``performance`` and ``audited``: each
    run's own (``dataset_file``, ``prompt_check``; the audited run's ``audit_config``);
    ``noise_ceiling``: the highest speed ratio a failed pair is measured again at;
    ``run_child(job, request_path)`` makes one LoadGen test (default: a child process)."""
    if attempts < 1:
        raise UserError(f"compliance.measurement_attempts is {attempts}: measure the pair at least once")
    verifier = VERIFIERS.get(test)
    if verifier is None:
        raise UserError(f"{test} verification is not implemented by this workflow ({', '.join(sorted(VERIFIERS))} are)")
    run_child = run_child or loadgen_job_in_child
    outs = {"performance": Path(performance_out), test: Path(audited_out)}
    record_dir = Path(attempts_out)
    shutil.rmtree(record_dir, ignore_errors=True)  # an earlier job's attempts are no evidence of this one
    record_dir.mkdir(parents=True)
    jobs = {
        "performance": {**run, **performance, "mode": "performance"},
        test: {**run, **audited, "mode": "performance"},
    }
    records: list[dict[str, Any]] = []
    for attempt in range(1, attempts + 1):
        started = time.time()
        for name, out in outs.items():
            shutil.rmtree(out, ignore_errors=True)
            print(f"measurement pair: attempt {attempt} of {attempts}: the {name} run", flush=True)
            run_child({**jobs[name], "out_dir": str(out)}, record_dir / f"attempt{attempt}.{name}.request.json")
        verdict = verifier.verify(
            VerifyInputs(
                run=outs[test],
                scenario=scenario,
                model_dir=run["model_dir"],
                rules_test=rules_test,
                performance_run=str(outs["performance"]),
            )
        )
        validity = {name: _validity(out) for name, out in outs.items()}
        both_valid = all(v == "VALID" for v in validity.values())
        speedup = verdict.details.get("speedup")
        noise = both_valid and isinstance(speedup, float) and speedup < noise_ceiling
        records.append(
            {
                "attempt": attempt,
                "passed": verdict.passed,
                "validity": validity,
                "seconds": round(time.time() - started, 1),
                **verdict.details,
            }
        )
        summary = f"{test}: " + "; ".join(verdict.lines[-2:])
        if verdict.passed or not noise or attempt == attempts:
            print(f"measurement pair: attempt {attempt} of {attempts}: {summary}", flush=True)
            break
        kept = record_dir / f"attempt{attempt}"
        kept.mkdir()
        for name, out in outs.items():
            shutil.move(str(out), str(kept / name))
        print(
            f"measurement pair: attempt {attempt} of {attempts}: {summary}, both runs VALID and the ratio below "
            f"{noise_ceiling} (the machine's run-to-run noise can explain it); measuring the pair again "
            f"(this attempt's runs: {kept})",
            flush=True,
        )
    result = {
        "test": test,
        "scenario": scenario,
        "max_attempts": attempts,
        "noise_ceiling": noise_ceiling,
        "attempts": records,
        "passed": records[-1]["passed"],
        "packaged_attempt": records[-1]["attempt"],
    }
    (record_dir / "attempts.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result
