"""Our LiveCodeBench scorer against the reference, side by side, on tests/lcb_corpus.py.

Ours: :func:`mlperf_repro.accuracy.livecodebench.extract_code` on each model output, then
:func:`.grade_many` (the sandbox, items in parallel), as the gpt-oss evaluation runs them.
Reference: MLCommons' ``parse_code`` (language/gpt-oss-120b/eval_accuracy.py; its functions are
loaded from the file, not imported, so that transformers is not needed) and LiveCodeBench's
``check_correctness`` (lcb_runner/evaluation/compute_code_generation_metrics.py: the test
process, run_test, its global timeout), an item correct when every result is > 0, as
``extract_instance_results`` reads it. Both run with the corpus's per-test timeout (2 s).

``--reference DIR`` holds the two fetched copies (nothing is copied into this repository)::

    DIR/inference/language/gpt-oss-120b/eval_accuracy.py   (mlcommons/inference)
    DIR/LiveCodeBench/lcb_runner/...                        (LiveCodeBench at the commit the
                                                             gpt-oss-120b submodule pins)

Prints every disagreement (id, ours, reference, why), the counts and the timings; exit status 1
when a disagreement is not one of the corpus's documented differences (lcb_corpus.JUSTIFIED).
``--record`` writes the reference's verdicts to tests/data/lcb_reference_corpus.json, which
tests/test_accuracy_lcb_reference.py checks our scorer against without the reference code.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

import lcb_corpus  # noqa: E402

RECORD = REPO / "tests" / "data" / "lcb_reference_corpus.json"
EVAL_ACCURACY = Path("inference") / "language" / "gpt-oss-120b" / "eval_accuracy.py"
LCB = Path("LiveCodeBench")

_parse_code: Any = None
_check_correctness: Any = None


def _load_reference(root: str) -> None:
    """In each reference worker: MLCommons' extraction functions and lcb_runner's checker."""
    global _parse_code, _check_correctness
    import re

    import pandas as pd

    source = (Path(root) / EVAL_ACCURACY).read_text()
    wanted = {"validate_text_input", "extract_final_section", "parse_code"}
    tree = ast.parse(source)
    module = ast.Module([n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted], [])
    namespace: dict[str, Any] = {"re": re, "pd": pd, "Optional": __import__("typing").Optional, "Any": Any}
    exec(compile(module, str(Path(root) / EVAL_ACCURACY), "exec"), namespace)
    _parse_code = namespace["parse_code"]
    sys.path.insert(0, str(Path(root) / LCB))
    from lcb_runner.evaluation.compute_code_generation_metrics import check_correctness

    _check_correctness = check_correctness


def _reference_one(args: tuple[str, dict[str, str], int]) -> tuple[bool, str, float]:
    output, sample, timeout = args
    start = time.perf_counter()
    code = _parse_code(output)
    if not code:  # evaluate_livecodebench_detailed: "No code or question_id provided"
        return False, "no code extracted", 0.0
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        try:
            results, metadata = _check_correctness(sample, code, timeout, debug=False)
        except Exception as exc:  # evaluate_generations_by_problem: a failed item ("TestRunnerError")
            return False, f"TestRunnerError: {exc!r}"[:300], time.perf_counter() - start
    fixed = []
    for value in results:  # evaluate_generations_by_problem's clean-up of numpy values
        if hasattr(value, "item") and not isinstance(value, bool):
            value = value.item(0) if hasattr(value, "shape") else value.item()
        fixed.append(value)
    passed = all(value > 0 for value in fixed)
    why = "all tests passed" if passed else str(metadata.get("error_message") or metadata.get("error") or fixed)
    return passed, why[:300], time.perf_counter() - start


def run_reference(root: str, entries: list[dict[str, Any]], workers: int) -> tuple[list[tuple[bool, str]], float]:
    import multiprocessing

    work = [(e["output"], lcb_corpus.evaluation_sample(e["problem"]), lcb_corpus.TIMEOUT_S) for e in entries]
    start = time.perf_counter()
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_load_reference, initargs=(root,)) as pool:
        results = list(pool.map(_reference_one, work))
    return [(passed, why) for passed, why, _ in results], time.perf_counter() - start


def run_ours(entries: list[dict[str, Any]], workers: int) -> tuple[list[tuple[bool, str]], float]:
    from mlperf_repro.accuracy.livecodebench import extract_code, grade_many, parse_tests

    start = time.perf_counter()
    suites = {
        name: parse_tests(lcb_corpus.problem_columns(name), f"corpus problem {name}") for name in lcb_corpus.PROBLEMS
    }
    items = [(extract_code(e["output"]), suites[e["problem"]]) for e in entries]
    verdicts = grade_many(items, workers=workers, timeout_s=lcb_corpus.TIMEOUT_S)
    return [(v.passed, v.reason) for v in verdicts], time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True, help="folder with inference/ and LiveCodeBench/ (see above)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--record", action="store_true", help=f"write the reference's verdicts to {RECORD}")
    parser.add_argument("--commits", default="", help="the fetched commits, recorded with --record")
    parser.add_argument("--only", help="a substring of the entry ids to run")
    args = parser.parse_args(argv)
    root = Path(args.reference)
    for needed in (EVAL_ACCURACY, LCB / "lcb_runner" / "evaluation" / "testing_util.py"):
        if not (root / needed).is_file():
            print(f"error: {root / needed} not found (see --help for the layout of --reference)", file=sys.stderr)
            return 2
    entries = lcb_corpus.corpus()
    if args.only:
        entries = [e for e in entries if args.only in e["id"]]
    reference, ref_s = run_reference(str(root), entries, args.workers)
    ours, ours_s = run_ours(entries, args.workers)
    unexplained = explained = 0
    for entry, (o_pass, o_why), (r_pass, r_why) in zip(entries, ours, reference):
        if o_pass == r_pass:
            continue
        reason = lcb_corpus.JUSTIFIED.get(entry["id"])
        tag = f"documented: {reason}" if reason else "UNEXPLAINED"
        explained += bool(reason)
        unexplained += not reason
        print(
            f"{entry['id']}: ours {'pass' if o_pass else 'fail'} ({o_why}); reference "
            f"{'pass' if r_pass else 'fail'} ({r_why}) [{tag}]"
        )
    passes = sum(p for p, _ in reference)
    print(
        f"{len(entries)} entries ({passes} pass in the reference): {unexplained + explained} disagreements "
        f"({unexplained} unexplained, {explained} documented); reference {ref_s:.1f} s, ours {ours_s:.1f} s "
        f"({args.workers} workers, {lcb_corpus.TIMEOUT_S} s per test)"
    )
    if args.record:
        if args.only:
            print("error: --record needs the whole corpus (no --only)", file=sys.stderr)
            return 2
        record = {
            "reference": {"commits": args.commits, "timeout_s": lcb_corpus.TIMEOUT_S, "entries": len(entries)},
            "verdicts": {e["id"]: {"passed": p, "why": w[:120]} for e, (p, w) in zip(entries, reference)},
        }
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(f"recorded {len(entries)} reference verdicts in {RECORD.relative_to(REPO)}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
