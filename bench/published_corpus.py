"""Our submission check against a round's published results, submitter by submitter,
and (optionally) the official MLCommons checker on the same folders.

    python bench/published_corpus.py RESULTS [--inference CHECKOUT] [--round v6.0]
        [--division closed] [--git-dir GIT_DIR] [--json OUT.json]

RESULTS is a published results repository (it holds closed/<submitter>/..., for example a
checkout of gbeezybez/inference_results_v6.0). Each submitter is checked on its own, as
the tree it submitted (<division>/<submitter> in an otherwise empty root), in process.
With --inference (a checkout of mlcommons/inference), the official checker
(tools/submission/submission_checker, --version ROUND) runs on the same view.

Our errors are sorted into:
- agreed: the official checker rejects the submitter too;
- on purpose: rules where we are stricter than the official checker on purpose (listed in
  ON_PURPOSE with the reason);
- snapshot gap: the file is absent from this copy of the repository (--git-dir names the
  repository's git folder; objects it lacks are listed as absent), not from the submission;
- false: everything else where the official checker accepts the submitter. The goal is none.

Prints a Markdown table per submitter and the totals, with our total check time.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from official_checker import run_official  # noqa: E402  (bench/, the script's folder)

from mlperf_repro.benchmarks import load_round  # noqa: E402
from mlperf_repro.check.tree import check_tree  # noqa: E402

# Where our check is stricter than the official one on purpose: (rule, message pattern) -> why.
ON_PURPOSE = {
    ("hygiene", "names starting with '.'"): "MLCommons' repository_checks.sh refuses dot-files at upload; "
    "the modular checker no longer looks",
    ("hygiene", "symbolic link"): "repository_checks.sh refuses symbolic links, and a checker that follows one "
    "reads files that are not the submission",
    ("required-files", "not a folder (the checker does not follow it)"): "the folder is a symbolic link, "
    "which the checker never follows (hygiene reports the link)",
    ("summary-detail", ""): "a run's summary and detail log disagree (one was edited, or they come from two "
    "runs); the official checker reads the detail log only",
    ("compliance-evidence", "sampled answer(s)"): "a compliance run's accuracy log holding far fewer answers "
    "than its audit.config samples (33 published llama TEST06 logs of v5.1/v6.0 Intel-family CPU and GPU systems, "
    "and Google's deepseek-r1, hold none: their TEST06 verdict checked no output); the official checker reads the "
    "verdict lines only",
    ("compliance-evidence", ""): "a verify file's scores or verdict are not what the compliance and performance "
    "logs in the tree give (verified against another run, or copied from another result); the official checker "
    "reads the verdict line only",
    ("accuracy-evidence", ""): "accuracy.txt's counts disagree with the accuracy run's log; the official checker "
    "does not compare them",
    ("structure", ""): "a file the layout does not name where results live, or a second copy of a result's "
    "record beside the one the checker reads; the official checker reads only the paths it expects",
    ("hygiene", "spaces in names"): "repository_checks.sh refuses names with spaces",
    ("hygiene", "__pycache__"): "the previous checker refused __pycache__ folders",
    ("loadgen-valid", ""): "the official checker does not look at result_validity (a LoadGen INVALID run passes)",
    ("test-mode", ""): "the official checker does not look at the test mode: an accuracy folder holding a "
    "PerformanceOnly run has not scored every sample once",
    ("accuracy-duplicates", ""): "a sample logged twice in an accuracy log: LoadGen's accuracy mode issues each "
    "sample once, so the log is not an accuracy run's; the official checker does not look",
    ("verify-evidence", ""): "a compliance verify file whose own numbers contradict its verdict, its threshold "
    "or the round's sample count (TEST07 and TEST09 runs swapped, a TEST01 file of another benchmark); the "
    "official checker reads the verdict line only",
    ("audit-settings", ""): "a compliance run's log does not show its test's audit.config (a TEST04 run that "
    "issued no sample twice, a TEST09 folder holding a run with TEST07's settings, a TEST01 run that logged no "
    "sampled accuracy): it is not the test's run; the official checker reads the verify file only",
    ("compliance", "keeps no log of its run"): "a TEST06 verdict with no accuracy log of its run in the folder: "
    "nothing in the tree supports it; the official checker reads the verdict lines only",
    ("run-provenance", ""): "one run claimed by two results that cannot share it (one machine filed under two "
    "system names, another benchmark's TEST01 run, the performance run in the accuracy or TEST01 folder, the "
    "accuracy run's log in a TEST06 folder), or an accuracy.txt naming another result's accuracy log; the official "
    "checker reads each folder alone",
    ("system-description", "is a placeholder"): "a required system field left as TODO or TBD (v6.0 Supermicro's "
    "8xMI355X, v5.1 Dell_Broadcom and The_Stage): the field says nothing, as an empty one would; the official "
    "checker reads only that it is non-empty",
    ("seeds", "TEST07"): "a compliance run made with other seeds than the round's (v6.0 RedHat's gpt-oss Offline "
    "TEST07 logs seeds 0): its performance-mode schedule is not the round's; the official checker reads the seeds "
    "of the performance run only",
    ("round-settings", "the TEST01 run"): "a TEST01 run logged with TEST04's audit pattern (v6.0 Lenovo's 3d-unet "
    "TEST01 folders hold resnet's TEST04 run): not the test's run; the official checker reads the verify file only",
    ("sut-match", ""): "a result's runs on two systems under test (v6.0 Lenovo's 3d-unet TEST01 folders hold "
    "resnet's LWIS_Server run): not the result's run; the official checker reads each folder alone",
    ("loadgen-build", ""): "a LoadGen whose source files hash otherwise than its commit's in the submitter's "
    "other logs (v5.1 Google's H200 retinanet logs: test_settings_internal.cc is not b9ed3c7fec's, whose sha1 "
    "the other 29 logs give): the rules allow only an unmodified LoadGen; the official checker does not look",
}


def on_purpose(finding) -> str | None:
    for (rule, pattern), why in ON_PURPOSE.items():
        if finding.rule == rule and pattern in finding.message:
            return why
    return None


def absent_paths(git_dir: Path) -> set[str]:
    """Files the repository lists but whose contents this copy lacks (a partial clone)."""
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-l", "HEAD"], capture_output=True, text=True, check=True
    ).stdout
    absent = set()
    for line in out.splitlines():
        meta, _, path = line.partition("\t")
        if meta.split()[-1] == "BAD":
            absent.add(path)
    return absent


def build_view(submitter: Path, view: Path, division: str, absent: set[str]) -> list[str]:
    """``view/<division>/<submitter>`` as a copy of the submitter's tree (a copy, not links:
    the checker refuses links and never follows one; links inside the tree stay links), or,
    where this copy of the repository lacks files of some results, of everything but those
    result folders (both checkers then judge the same, complete results). Returns the
    folders left out."""
    prefix = f"{division}/{submitter.name}/"
    gaps = sorted(
        {"/".join(a.split("/")[:6]) for a in absent if a.startswith(prefix + "results/") and len(a.split("/")) > 6}
    )
    target = view / division / submitter.name
    skipped = {submitter.parent.parent / gap for gap in gaps}

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if Path(folder) / n in skipped]

    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(submitter, target, symlinks=True, ignore=ignore)
    for gap in gaps:  # a benchmark or system folder whose every result was left out goes too
        folder = view / gap
        while folder.parent != target and folder.parent.is_dir() and not any(folder.parent.iterdir()):
            folder.parent.rmdir()
            folder = folder.parent
    return gaps


def snapshot_gap(finding, absent: set[str]) -> bool:
    path = finding.path
    if path in absent:
        return True
    # An empty folder whose files this copy lacks.
    return finding.message == "empty folder" and any(a.startswith(path + "/") for a in absent)


def official_verdict(checkout: Path, view: Path, round_name: str, submitter: str) -> tuple[str, list[str], float]:
    run = run_official(checkout, view, round_name, submitter)
    errors = [f"ERROR] {line}" for line in run.errors]
    if run.crash:
        errors.append(f"ERROR] the official checker stopped with {run.crash}")
        return "crashed", errors, run.seconds
    return ("OK" if run.ok else "errors"), errors, run.seconds


RESULT_FOLDER = re.compile(r"(?:closed|open|network)/[^/\s'\"]+/results/[^/\s'\"]+/[^/\s'\"]+/[^/\s'\"]+")


def result_folder(path: str) -> str | None:
    match = RESULT_FOLDER.match(path)
    return match.group(0) if match else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--inference", type=Path, help="a checkout of mlcommons/inference (runs the official checker)")
    parser.add_argument("--round", default="v6.0")
    parser.add_argument("--division", action="append", help="division(s) to check (default: closed)")
    parser.add_argument("--git-dir", type=Path, help="the results repository's git folder (to tell snapshot gaps)")
    parser.add_argument("--json", type=Path, help="write the per-submitter figures here")
    args = parser.parse_args(argv)
    rules = load_round(args.round)
    absent = absent_paths(args.git_dir) if args.git_dir else set()
    rows, ours_seconds = [], 0.0
    for division in args.division or ["closed"]:
        for submitter in sorted(p for p in (args.results / division).iterdir() if p.is_dir()):
            with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
                view = Path(tmp)
                left_out = build_view(submitter, view, division, absent)
                start = time.perf_counter()
                findings = check_tree(view, rules)
                ours_seconds += time.perf_counter() - start
                official = (
                    official_verdict(args.inference, view, args.round, submitter.name) if args.inference else None
                )
            errors = [f for f in findings if f.severity == "error"]
            # The result folders the official checker names in its errors.
            flagged = {m.group(0) for line in (official[1] if official else []) for m in RESULT_FOLDER.finditer(line)}
            row = {
                "division": division,
                "submitter": submitter.name,
                "results": sum(1 for _ in (submitter / "results").glob("*/*/*") if _.is_dir()),
                "our_errors": len(errors),
                "official": official[0] if official else "not run",
                "official_errors": official[1] if official else [],
                "left_out_snapshot_gaps": left_out,
                "agreed": [],
                "on_purpose": [],
                "snapshot_gap": [],
                "false": [],
            }
            for finding in errors:
                if snapshot_gap(finding, absent) or (
                    # a benchmark folder short of the scenarios left out of the view
                    finding.rule == "scenario-set" and any(gap.startswith(finding.path + "/") for gap in left_out)
                ):
                    row["snapshot_gap"].append(finding.line())
                elif (why := on_purpose(finding)) is not None:
                    row["on_purpose"].append(f"{finding.line()}  [why: {why}]")
                elif (
                    official
                    and official[0] != "OK"
                    and (result_folder(finding.path) in flagged or result_folder(finding.path) is None)
                ):
                    # The official checker rejects this result folder too (or, for a finding
                    # outside results/, the submitter).
                    row["agreed"].append(finding.line())
                else:
                    row["false"].append(finding.line())
            rows.append(row)
    print(render(rows, args.round, ours_seconds))
    if args.json:
        args.json.write_text(json.dumps({"round": args.round, "seconds": ours_seconds, "submitters": rows}, indent=2))
    return 1 if any(r["false"] for r in rows) else 0


def render(rows: list[dict], round_name: str, seconds: float) -> str:
    lines = [
        f"# Our check over the published {round_name} results",
        "",
        "| submitter | results | left out (snapshot gap) | our errors | official | agreed | on purpose | "
        "snapshot gap | false |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['division']}/{r['submitter']} | {r['results']} | {len(r['left_out_snapshot_gaps'])} | "
            f"{r['our_errors']} | {r['official']} | "
            f"{len(r['agreed'])} | {len(r['on_purpose'])} | {len(r['snapshot_gap'])} | {len(r['false'])} |"
        )
    total = {k: sum(len(r[k]) for r in rows) for k in ("agreed", "on_purpose", "snapshot_gap", "false")}
    lines += [
        "",
        f"{len(rows)} submitters, {sum(r['results'] for r in rows)} results; our errors: "
        + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in total.items())
        + f"; our check took {seconds:.1f} s in all",
    ]
    for kind in ("false", "on_purpose", "agreed"):
        listed = [(r["submitter"], line) for r in rows for line in r[kind]]
        if listed:
            lines += ["", f"## {kind.replace('_', ' ')} ({len(listed)})", ""]
            lines += [f"- {line}" for _, line in listed[:200]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
