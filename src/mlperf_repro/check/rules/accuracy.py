"""Accuracy: the accuracy log (truncated, each sample once), accuracy.txt (readable,
against the targets) and what accuracy.txt records against the accuracy run."""

from __future__ import annotations

import hashlib
import re
import statistics
from pathlib import Path

from ...accuracy.open_accuracy import UNQUANTIZED_VIDEOS, OpenDeclaration, read_open_accuracy
from ...accuracy.sandbox import UNSANDBOXED_CONFIG_KEY, UNSANDBOXED_NOTE
from ...accuracy.video_quality import OPEN_METRICS, read_video, score_videos
from ...errors import UserError
from ..endpoints_logs import score_readings
from ..evidence import cross_checked, derived, record_kind
from ..findings import Finding
from ..model import (
    ACC,
    ACCURACY_ENTRY,
    DETAIL_LOG,
    HASH_LINE,
    TOKEN_RATES,
    ScenarioResult,
    TreeContext,
    accuracy_entries,
    issued_accuracy_samples,
    number,
    performance_logs,
    plain,
    rule,
)

ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
record_kind(
    ACCURACY_LOG,
    (
        "accuracy/mlperf_log_accuracy.json",
        "TEST*/accuracy/mlperf_log_accuracy.json",
        "performance/run_1/mlperf_log_accuracy.json",
    ),
    "json",
    "the samples a run logged (truncated to its two ends in a full-scale tree)",
    trusted={
        "data": "the model's output: redone only where an evaluator runs (TEST06, TEST09 in the compliance rules)"
    },
)
record_kind(
    ACCURACY_TXT,
    "accuracy/accuracy.txt",
    "text",
    "the evaluator's scores of the accuracy run",
)


@rule(
    "accuracy-log",
    evidence=[
        cross_checked(DETAIL_LOG, "effective_accuracy_sample_count", "the round's accuracy sample count"),
        cross_checked(
            DETAIL_LOG,
            "qsl_reported_total_count",
            "the round's accuracy sample count (with effective_accuracy_sample_count)",
        ),
        cross_checked(
            ACCURACY_TXT,
            "hash",
            "present (the official checker's pattern), 64 hex digits; the whole log's sha256 in accuracy-evidence. "
            "The first line is read: the truncation script appends one more each time it is rerun",
        ),
    ],
)
def check_accuracy_log(ctx: TreeContext) -> list[Finding]:
    """Truncated log, hash line, values the checker's regexes can read, full coverage."""
    findings = []
    limit = int(ctx.rules["accuracy_log_max_bytes"])
    for result in ctx.results:
        folder = result.path / "accuracy"
        log = folder / "mlperf_log_accuracy.json"
        if ctx.files.is_file(log) and ctx.files.size(log) > limit:
            findings.append(
                Finding("accuracy-log", ctx.rel(log), f"{ctx.files.size(log)} bytes > {limit}: not truncated")
            )
        txt = folder / "accuracy.txt"
        if ctx.files.is_file(txt):
            text = ctx.files.read_text(txt)
            found_hash = HASH_LINE.search(text)
            if not found_hash:
                findings.append(Finding("accuracy-log", ctx.rel(txt), "no hash=<sha256> line"))
            elif not re.fullmatch(r"[0-9a-f]{64}", found_hash.group(1)):
                findings.append(
                    Finding(
                        "accuracy-log", ctx.rel(txt), f"hash={found_hash.group(1)[:70]} is not a sha256 (64 hex digits)"
                    )
                )
            if result.facts:
                values = result.facts.accuracy_values(text)
                for metric in result.facts.absolute_targets(result.scenario):
                    not_computed = re.search(rf"^{re.escape(metric)}: not computed here: (.*)$", text, re.MULTILINE)
                    if metric not in values and not_computed:
                        # The evaluator could not compute it on this machine and said so
                        # (text-to-video without VBench's checkpoints): not a format fault.
                        findings.append(_not_computed(ctx, result, txt, text, metric, not_computed.group(1).strip()))
                    elif metric not in values:
                        findings.append(
                            Finding(
                                "accuracy-log",
                                ctx.rel(txt),
                                f"the checker's pattern cannot read "
                                f"{metric} (plain floats, as the reference script prints)",
                            )
                        )
        detail = result.detail(ACC)
        if detail is not None and result.facts and not ctx.test_scale:
            count = number(issued_accuracy_samples(detail))
            expected = result.facts.accuracy_sample_count(result.scenario)
            if count is None or count != expected:
                findings.append(
                    Finding(
                        "accuracy-log",
                        ctx.rel(result.log_path(ACC)),
                        f"the accuracy run covered {plain(count)} samples; the dataset has {expected}",
                    )
                )
    return findings


def _not_computed(ctx: TreeContext, result: ScenarioResult, txt: Path, text: str, metric: str, why: str) -> Finding:
    """A round's metric the evaluator could not compute here: an error, unless an open-division
    stand-in declares weight-free metrics in its place (accuracy.open_accuracy) consistently
    and they meet their targets; then a warning that says what judged it."""
    declared = read_open_accuracy(text)
    missing = f"{metric} was not computed here ({why})"
    if declared is None:
        return Finding("accuracy-log", ctx.rel(txt), f"{missing}; the result cannot be submitted until it is")
    if ctx.division != "open":
        return Finding(
            "accuracy-log",
            ctx.rel(txt),
            f"{missing}; the open-division metrics it declares ({', '.join(declared.metrics)}) do not replace it "
            f"in the {ctx.division} division: the result cannot be submitted until it is",
        )
    problems = open_accuracy_problems(ctx, result, declared)
    if problems:
        return Finding(
            "accuracy-log",
            ctx.rel(txt),
            f"{missing}, and the open-division metrics declared in its place cannot stand in for it: "
            + "; ".join(problems),
        )
    judged = ", ".join(
        f"{name} {declared.values[name]} >= {target['minimum']}" for name, target in declared.targets.items()
    )
    return Finding(
        "accuracy-log",
        ctx.rel(txt),
        f"{metric} not computed here; judged instead by the open-division metrics it declares ({judged}; "
        f"{len(declared.samples)} packaged samples recomputed from the tree): not comparable with {metric}",
        "warning",
    )


def open_accuracy_problems(ctx: TreeContext, result: ScenarioResult, declared: OpenDeclaration) -> list[str]:
    """What keeps an accuracy.txt's open-division metrics (accuracy.open_accuracy) from standing
    in for the round's score: the result must be a text-to-video stand-in that model_mapping.json
    maps to its benchmark; every judged metric meets its target, a fraction target is that
    fraction of the unquantized value it names; each metric covers every accuracy sample; and the
    values of the packaged samples are what their videos (and the unquantized pipeline's beside
    them) give when recomputed here."""
    problems = list(declared.problems)
    if result.facts is None or result.facts.facts.get("task") != "text-to-video":
        problems.append(f"{result.mlperf_benchmark} is not a text-to-video benchmark")
    mapped = ctx.model_mapping.get(result.benchmark)
    if result.benchmark == result.mlperf_benchmark or mapped != result.mlperf_benchmark:
        problems.append(
            f"model_mapping.json does not declare {result.benchmark} a stand-in for {result.mlperf_benchmark} "
            f"(it maps it to {mapped!r}): the real model is judged by the round's score"
        )
    judged = [m for m in declared.metrics if m in OPEN_METRICS and OPEN_METRICS[m].target]
    if not judged:
        problems.append(f"no judged metric declared ({', '.join(m for m, x in OPEN_METRICS.items() if x.target)})")
    for name in judged:
        value, target = declared.values.get(name), declared.targets.get(name)
        if target is None:
            problems.append(f"{name} has no target")
            continue
        kind = "fraction" if "fraction" in target else "minimum"
        if kind != OPEN_METRICS[name].target:
            problems.append(f"{name}'s target is a {kind}, not a {OPEN_METRICS[name].target}")
        if kind == "fraction":
            expected = round(target["fraction"] * target["unquantized"], 6)
            if not 0 < target["fraction"] <= 1 or abs(target["minimum"] - expected) > 1.5e-6:
                problems.append(
                    f"{name}'s target {target['minimum']} is not {target['fraction']} x {target['unquantized']}"
                )
        if value is None:
            problems.append(f"{name} was not computed")
        elif value < target["minimum"]:
            problems.append(f"{name} {value} < target {target['minimum']}")
    detail = result.detail(ACC)
    samples = None if detail is None else number(issued_accuracy_samples(detail))
    for name in declared.metrics:
        count = declared.videos.get(name)
        if samples is not None and count is not None and count != int(samples):
            problems.append(f"{name} covers {count} videos; the accuracy run has {plain(samples)} samples")
    problems += _recomputed_samples(ctx, result, declared)
    return problems


def _recomputed_samples(ctx: TreeContext, result: ScenarioResult, declared: OpenDeclaration) -> list[str]:
    """The declared values of each packaged video (accuracy/videos/<sample>.mp4), recomputed from
    it and, for the fidelity metrics, from the unquantized pipeline's video beside it."""
    folder = result.path / "accuracy"
    stems = [
        str(s) for s in ((result.facts.accuracy.get("extra_files") or {}).get("videos", []) if result.facts else [])
    ]
    problems = []
    for stem in stems:
        video = folder / "videos" / f"{stem}.mp4"
        if not ctx.files.is_file(video):
            continue  # accuracy-files reports it
        values = declared.samples.get(int(stem))
        if values is None:
            problems.append(f"no 'open_accuracy sample {stem}' line for the packaged video {stem}.mp4")
            continue
        unquantized = folder / UNQUANTIZED_VIDEOS / f"{stem}.mp4"
        compares = [m for m in declared.metrics if m in OPEN_METRICS and OPEN_METRICS[m].needs_reference_videos]
        if compares and not ctx.files.is_file(unquantized):
            problems.append(
                f"{ctx.rel(unquantized)} is missing: {', '.join(compares)} of sample {stem} cannot be recomputed"
            )
            continue
        try:
            recomputed = score_videos(
                {int(stem): read_video(video, ctx.rel(video))},
                [m for m in declared.metrics if m in OPEN_METRICS],
                {int(stem): read_video(unquantized, ctx.rel(unquantized))} if compares else None,
            )["per_sample"][int(stem)]
        except UserError as exc:
            problems.append(str(exc))
            continue
        for name, value in recomputed.items():
            said = values.get(name)
            if (said is None) != (value is None) or (value is not None and abs(said - value) > 2e-6):
                problems.append(
                    f"sample {stem}: {name} is {value if value is None else round(value, 6)} "
                    f"recomputed from its videos, {said} declared"
                )
    return problems


@rule("accuracy-files")
def check_accuracy_files(ctx: TreeContext) -> list[Finding]:
    """Outputs the accuracy folder must carry for the reviewers (the table's extra_files:
    e.g. the generated videos of named samples), each file named by its sample."""
    findings = []
    for result in ctx.results:
        if result.facts is None:
            continue
        for folder_name, stems in (result.facts.accuracy.get("extra_files") or {}).items():
            folder = result.path / "accuracy" / folder_name
            if not ctx.files.is_dir(folder):
                findings.append(
                    Finding("accuracy-files", ctx.rel(folder), f"missing: the outputs of samples {', '.join(stems)}")
                )
                continue
            present = {p.name.split(".")[0] for p in ctx.files.files(folder)}
            missing = [stem for stem in stems if stem not in present]
            if missing:
                findings.append(
                    Finding("accuracy-files", ctx.rel(folder), f"no output file for sample(s) {', '.join(missing)}")
                )
    return findings


# The start of one accuracy-log entry (LoadGen writes one per line); a truncated log keeps
# whole entries at its ends and the start of the one cut at its first 4 KB.


# An LLM accuracy-log entry whole enough to count its tokens (as in every published LLM log).
# LoadGen 6.0.15 writes the first token ("token_data") between them.
_TOKEN_ENTRY = re.compile(
    r'"qsl_idx"\s*:\s*(\d+)\s*,\s*"data"\s*:\s*"([0-9A-Fa-f]*)"\s*,'
    r'(?:\s*"token_data"\s*:\s*"[0-9A-Fa-f]*"\s*,)?\s*"token_count"\s*:\s*(\d+)'
)


@rule(
    "accuracy-duplicates",
    evidence=[
        cross_checked(
            ACCURACY_LOG, "qsl_idx", "each sample once (its other entries); below the run's qsl_reported_total_count"
        ),
        cross_checked(
            ACCURACY_LOG,
            "token_count",
            "the number of int32 (or int64) tokens in the entry's data (LLMs; in every closed published log, a "
            "warning in the open division, where v5.1 open/Krai's harness counts otherwise)",
        ),
        cross_checked(
            ACCURACY_LOG, "seq_id", "the same entry kept twice at a truncated log's two ends, not a second sample"
        ),
        cross_checked(DETAIL_LOG, "qsl_reported_total_count", "the accuracy log's qsl_idx (all below it)"),
    ],
)
def check_accuracy_duplicates(ctx: TreeContext) -> list[Finding]:
    """An accuracy run issues each sample once: no qsl_idx in two entries of the accuracy
    log (the entries a truncated log still shows). The same entry twice (seq_id and
    qsl_idx) is the overlap of a log truncated to its two ends, not a duplicate. Every
    qsl_idx lies within the sample library the run logged (qsl_reported_total_count)."""
    findings = []
    for result in ctx.results:
        log = result.path / "accuracy" / "mlperf_log_accuracy.json"
        if not ctx.files.is_file(log):
            continue
        seq_ids: dict[int, set[int]] = {}
        miscounted = []
        for line in ctx.files.lines(log):
            for seq_id, qsl_idx in ACCURACY_ENTRY.findall(line):
                seq_ids.setdefault(int(qsl_idx), set()).add(int(seq_id))
            if result.facts and result.facts.facts.get("use_token_latencies"):
                # An LLM's output is its tokens as int32 (or int64): token_count is their number.
                for qsl_idx, data, count in _TOKEN_ENTRY.findall(line):
                    if int(count) not in (len(data) // 8, len(data) // 16):
                        miscounted.append(f"qsl_idx {qsl_idx}: token_count {count}, {len(data) // 2} bytes of tokens")
        if miscounted:
            findings.append(
                Finding(
                    "accuracy-duplicates",
                    ctx.rel(log),
                    f"{len(miscounted)} entr(ies) whose token_count is not the number of tokens in their data "
                    f"({'; '.join(miscounted[:3])})",
                    # (A warning in the open division: v5.1 open/Krai's harness reports other counts.)
                    "warning" if ctx.division == "open" else "error",
                )
            )
        total = number((result.detail(ACC) or {}).get("qsl_reported_total_count"))
        outside = sorted(q for q in seq_ids if total is not None and q >= total)
        if outside:
            findings.append(
                Finding(
                    "accuracy-duplicates",
                    ctx.rel(log),
                    f"logs qsl_idx {', '.join(map(str, outside[:5]))} but {ctx.rel(result.log_path(ACC))} reports a "
                    f"sample library of {plain(total)} (qsl_idx 0 to {plain(total - 1)}): the log is not of this run",
                )
            )
        repeated = {qsl: sorted(seqs) for qsl, seqs in sorted(seq_ids.items()) if len(seqs) > 1}
        if repeated:
            shown = "; ".join(
                f"qsl_idx {qsl} in seq_id {', '.join(map(str, seqs))}" for qsl, seqs in list(repeated.items())[:3]
            )
            findings.append(
                Finding(
                    "accuracy-duplicates",
                    ctx.rel(log),
                    f"{len(repeated)} sample(s) logged more than once ({shown}): an accuracy run "
                    "scores each sample once (is this a performance run's log?)",
                )
            )
    return findings


@rule(
    "accuracy-target",
    evidence=[
        cross_checked(
            ACCURACY_TXT,
            "<the round's metrics>",
            "the round's targets and upper bounds; not recomputed: ROUGE, exact match, ... need the dataset, and "
            "published accuracy logs are truncated",
        )
    ],
)
def check_accuracy_target(ctx: TreeContext) -> list[Finding]:
    """The round's targets and upper bounds; in the open division recorded, not enforced."""
    if ctx.test_scale:
        return []
    severity = "warning" if ctx.division == "open" else "error"
    findings = []
    for result in ctx.results:
        txt = result.path / "accuracy" / "accuracy.txt"
        if result.is_endpoints and result.facts is not None:
            findings.extend(_endpoints_accuracy(ctx, result, severity))
            continue
        if not ctx.files.is_file(txt) or result.facts is None:
            continue
        readings = result.facts.accuracy_readings(ctx.files.read_text(txt))
        for metric, minimum in result.facts.absolute_targets(result.scenario).items():
            for value in readings.get(metric, []):
                if value < minimum:
                    findings.append(
                        Finding("accuracy-target", ctx.rel(txt), f"{metric} {value} < target {minimum:.4f}", severity)
                    )
        for metric, maximum in result.facts.upper_bounds(result.scenario).items():
            for value in readings.get(metric, []):
                if value > maximum:
                    findings.append(
                        Finding(
                            "accuracy-target", ctx.rel(txt), f"{metric} {value} > upper bound {maximum:.4f}", severity
                        )
                    )
    return findings


def _endpoints_accuracy(ctx: TreeContext, result: ScenarioResult, severity: str) -> list[Finding]:
    """An endpoints result's score (accuracy_results.json): present, and against the
    targets where the table says how the benchmark's score reads (``accuracy_score``)."""
    detail = result.detail(ACC)
    if detail is None:
        return []  # required-files names the missing file
    where = ctx.rel(result.log_path(ACC))
    if detail.get("accuracy_score") is None:
        return [Finding("accuracy-target", where, "no accuracy score (accuracy_scores[].score)")]
    reading = (result.endpoints.get("accuracy_score") or {}).get(result.facts.name)
    targets = result.facts.absolute_targets(result.scenario)
    bounds = result.facts.upper_bounds(result.scenario)
    values = score_readings(detail["accuracy_score"], reading, sorted({*targets, *bounds}))
    findings = []
    for metric, minimum in targets.items():
        if metric in values and values[metric] < minimum:
            findings.append(
                Finding("accuracy-target", where, f"{metric} {values[metric]} < target {minimum:.4f}", severity)
            )
    for metric, maximum in bounds.items():
        if metric in values and values[metric] > maximum:
            findings.append(
                Finding("accuracy-target", where, f"{metric} {values[metric]} > upper bound {maximum:.4f}", severity)
            )
    return findings


# The gpt-oss evaluator's report: a row per dataset (Correct, Total, Repeats, Score =
# Correct / Repeats, Accuracy = Correct / Total), the sums, "FINAL SCORE: x% (Score/Max)"
# and the figure it prints for the checker. All 123 published v6.0 reports (accuracy.txt and
# TEST07's verify files) add up to the rounding of their two decimals.
_FINAL_SCORE = re.compile(r"^FINAL SCORE:\s*([\d.]+)%\s*\(([\d.]+)/([\d.]+)\)", re.MULTILINE)
_DATASET_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)%\s*$", re.MULTILINE)
_EXACT_MATCH = re.compile(r"'exact_match':\s*([\d.]+)")


_EVALUATED = re.compile(r"^Total samples evaluated:\s*(\d+)", re.MULTILINE)
_RAW_ACCURACY = re.compile(r"^Overall raw accuracy:\s*([\d.]+)%\s*\((\d+)/(\d+)\)", re.MULTILINE)


def _row_total(text: str, column: int = 1) -> int:
    """The sum of the report's dataset rows' Total (column 1) or Correct (column 0)."""
    return sum(int(row[1 + column]) for row in _DATASET_ROW.findall(text))


def report_sample_count(text: str) -> int | None:
    """The samples a gpt-oss evaluator's report says it scored (None for any other text)."""
    found = _EVALUATED.search(text)
    return int(found.group(1)) if found and _FINAL_SCORE.search(text) else None


def score_report_problems(text: str) -> list[str]:
    """Where a gpt-oss evaluator's report does not add up (empty for any other text)."""
    final = _FINAL_SCORE.search(text)
    if not final:
        return []
    try:
        percent, score, best = (float(v) for v in final.groups())
    except ValueError:
        return ["FINAL SCORE is not a number"]
    problems = []
    if best <= 0:
        return [f"FINAL SCORE's maximum is {best:g}"]
    # Score and Max are printed to two decimals: the ratio of the printed pair is that far off.
    slack = 100 * 0.005 * (1 / best + score / best**2) + 1e-9
    if abs(100 * score / best - percent) > 0.005 + slack:
        problems.append(f"FINAL SCORE {percent:g}% is not its own {score:g}/{best:g} ({100 * score / best:.3f}%)")
    rows = []
    for name, correct, total, repeats, row_score, row_accuracy in _DATASET_ROW.findall(text):
        c, t, r = int(correct), int(total), int(repeats)
        if t <= 0 or r <= 0 or c > t:
            problems.append(f"{name}: {c} correct of {t} in {r} repeats")
            continue
        rows.append((c / r, t / r))
        if abs(c / r - float(row_score)) > 0.0051:
            problems.append(f"{name}'s Score {row_score} is not {c}/{r} ({c / r:.2f})")
        if abs(100 * c / t - float(row_accuracy)) > 0.0051:
            problems.append(f"{name}'s Accuracy {row_accuracy}% is not {c}/{t} ({100 * c / t:.2f}%)")
    if rows:
        if abs(sum(r[0] for r in rows) - score) > 0.01 * len(rows):
            problems.append(f"the datasets' Scores add up to {sum(r[0] for r in rows):.2f}, not {score:g}")
        if abs(sum(r[1] for r in rows) - best) > 0.01 * len(rows):
            problems.append(f"the datasets' maxima add up to {sum(r[1] for r in rows):.2f}, not {best:g}")
    evaluated = _EVALUATED.search(text)
    if evaluated and rows and int(evaluated.group(1)) != _row_total(text):
        problems.append(
            f"Total samples evaluated: {evaluated.group(1)}, but its datasets' Totals add up to {_row_total(text)}"
        )
    raw = _RAW_ACCURACY.search(text)
    if raw and rows:
        correct, counted = int(raw.group(2)), int(raw.group(3))
        if correct != _row_total(text, column=0) or (evaluated and counted != int(evaluated.group(1))):
            problems.append(
                f"Overall raw accuracy counts {correct}/{counted}; its datasets give {_row_total(text, column=0)}/"
                f"{_row_total(text)}"
            )
    printed = _EXACT_MATCH.search(text)
    if printed:
        try:
            value = float(printed.group(1))
        except ValueError:
            value = None
        if value is None or abs(value - 100 * score / best) > 0.0005 + slack + 0.005:
            problems.append(
                f"prints 'exact_match': {printed.group(1)} for the checker, but its FINAL SCORE is "
                f"{100 * score / best:.3f}% ({score:g}/{best:g})"
            )
    return problems


def _half_unit(printed: str) -> float:
    """Half the last printed digit's unit ("0.9342" -> 0.00005): the value's rounding."""
    decimals = len(printed.split(".", 1)[1]) if "." in printed else 0
    return 0.5 * 10**-decimals


# COCO's table (retinanet's and yolo's evaluators): "Average Precision (AP) @[ IoU=0.50:0.95 |
# area= all | maxDets=100 ] = 0.37319", then "mAP=37.319%".
_COCO_ROW = re.compile(
    r"Average (Precision|Recall)\s+\((?:AP|AR)\) @\[ IoU=([\d.:]+)\s*\| area=\s*(\w+) \| maxDets=\s*(\d+) \] = "
    r"([-\d.]+)"
)
_COCO_MAP = re.compile(r"mAP=([\d.]+)%")


def coco_problems(text: str) -> list[str]:
    """A COCO table against itself: the mAP line is 100 x AP@[.50:.95] (to the digits both
    print); AP over the stricter IoUs is at most AP@.50; recall grows with the detections
    allowed. (All 99 published tables hold to it.)"""
    rows = {}
    for kind, iou, area, detections, value in _COCO_ROW.findall(text):
        rows.setdefault((kind, iou, area, detections), value)
    problems = []

    def value(*key: str) -> float | None:
        try:
            return float(rows[key])
        except (KeyError, ValueError):
            return None

    overall, loose, strict = (value("Precision", iou, "all", "100") for iou in ("0.50:0.95", "0.50", "0.75"))
    printed = _COCO_MAP.findall(text)
    if overall is not None and printed:
        try:
            stated = float(printed[-1])
        except ValueError:
            stated = None
        slack = 100 * _half_unit(rows[("Precision", "0.50:0.95", "all", "100")]) + _half_unit(printed[-1]) + 1e-9
        if stated is not None and abs(stated - 100 * overall) > slack:
            problems.append(f"mAP={printed[-1]}%, but its table's AP @[ IoU=0.50:0.95 ] is {overall:g}")
    for name, stricter in (("0.50:0.95", overall), ("0.75", strict)):
        if None not in (stricter, loose) and stricter > loose:
            problems.append(f"AP @[ IoU={name} ] {stricter:g} is above AP @[ IoU=0.50 ] {loose:g}")
    recalls = [value("Recall", "0.50:0.95", "all", d) for d in ("1", "10", "100")]
    recalls = [r for r in recalls if r is not None]
    if recalls != sorted(recalls):
        problems.append(f"its recall falls as more detections are allowed ({', '.join(f'{r:g}' for r in recalls)})")
    return problems


# KiTS19's evaluator (3d-unet): "Accuracy: mean = 0.86018, kidney = 0.9342, tumor = 0.7861",
# or "mean = ..., threshold = ... (Passed)" then "- Kidney: ..." and "- Tumor: ...".
_KITS = {
    "mean": re.compile(r"mean\s*=\s*([\d.]+)"),
    "kidney": re.compile(r"[Kk]idney\s*[=:]\s*([\d.]+)"),
    "tumor": re.compile(r"[Tt]umou?r\s*[=:]\s*([\d.]+)"),
}


def kits_problems(text: str) -> list[str]:
    """The mean DICE is the mean of the kidney's and the tumor's (to the digits printed)."""
    printed = {name: pattern.search(text) for name, pattern in _KITS.items()}
    if not all(printed.values()):
        return []
    try:
        mean, kidney, tumor = (float(printed[k].group(1)) for k in ("mean", "kidney", "tumor"))
    except ValueError:
        return []
    slack = sum(_half_unit(printed[k].group(1)) for k in ("kidney", "tumor")) / 2 + _half_unit(printed["mean"].group(1))
    if abs((kidney + tumor) / 2 - mean) > slack + 1e-9:
        return [f"mean = {mean:g} is not the mean of kidney {kidney:g} and tumor {tumor:g} ({(kidney + tumor) / 2:g})"]
    return []


# The classification evaluators' line ("accuracy=76.078%, good=38039, total=50000").
_GOOD_TOTAL = re.compile(r"accuracy=([\d.]+)%, good=(\d+), total=(\d+)")
# whisper's evaluator: "Word Error Rate: 2.1479...%, accuracy=97.8520...%"
_WER = re.compile(r"Word Error Rate:\s*([\d.]+)%,\s*accuracy=([\d.]+)%")
_ROUGE_REPORT = re.compile(r"'rouge1':")
_PRINTED_COUNT = re.compile(r"'(gen_num|gen_tok_len|tokens_per_sample)':\s*'?([\d.]+)")


# The mean output length a performance run implies (its token rate over its sample rate)
# against the accuracy run's tokens_per_sample: both generate the same dataset with the same
# model (where the round gives both runs one set). In the 702 published v6.0 and v5.1 LLM
# results that print it the two agree within 2.3% (llama2-70b Offline in open; closed 1.8%:
# the performance run samples the set, batching varies the answers a little); a run 3% off
# produced other outputs, or its rate was edited.
OUTPUT_LENGTH_TOLERANCE = 0.03
# One model's accuracy runs on one system (its scenarios, its 99 and 99.9 benchmarks) score
# one dataset: their tokens_per_sample agree within 3.8% in the 175 published groups (closed).
SCENARIOS_OUTPUT_TOLERANCE = 0.06
# A mean can be no longer than the longest answer: the reference SUT's cap on new tokens
# (the table's performance_max_output_tokens, or its generation settings), plus the token
# some harnesses count for the end of sequence, and a rounding. The published means reach
# 129.0 under llama3.1-8b's 128.
CAP_SLACK_TOKENS, CAP_SLACK = 1, 0.01


def performance_token_cap(facts) -> int | None:
    """The most new tokens a performance-run answer of the benchmark may have, where the round says."""
    if facts is None:
        return None
    generation = facts.facts.get("generation") or {}
    cap = (
        facts.facts.get("performance_max_output_tokens")
        or generation.get("max_new_tokens_performance")
        or generation.get("max_new_tokens")
    )
    return cap if isinstance(cap, int) and not isinstance(cap, bool) else None


def _own_sets(result: ScenarioResult) -> bool:
    """The benchmark's performance and accuracy runs read different sets (gpt-oss-120b: other
    prompts at another reasoning effort), so their output lengths need not agree."""
    dataset = (result.facts.facts.get("dataset") if result.facts else None) or {}
    return "accuracy_file" in dataset and dataset.get("accuracy_file") != dataset.get("performance_file")


@rule(
    "output-length-evidence",
    evidence=[
        cross_checked(
            DETAIL_LOG,
            "result_tokens_per_second",
            "over result_samples_per_second, the mean output length of accuracy.txt's tokens_per_sample (Offline)",
        ),
        cross_checked(
            DETAIL_LOG,
            "result_completed_tokens_per_second",
            "over result_completed_samples_per_sec, accuracy.txt's tokens_per_sample (Server, Interactive)",
        ),
        cross_checked(
            ACCURACY_TXT,
            "tokens_per_sample",
            "the performance run's tokens per sample (its two rates); the model's other accuracy runs on the system "
            "(within 6%)",
        ),
        cross_checked(
            DETAIL_LOG,
            "result_samples_per_second",
            "with the token rate, a mean output length no longer than the round's cap on new tokens "
            "(performance_max_output_tokens; a warning in open)",
        ),
    ],
)
def check_output_length_evidence(ctx: TreeContext) -> list[Finding]:
    """A performance run's token rate against the output length the accuracy run measured:
    the benchmark's metric (tokens/s) forged alone, or a run that wrote shorter answers than
    the ones scored, no longer agree."""
    findings = []
    for result, detail, where in performance_logs(ctx):
        txt = result.path / "accuracy" / "accuracy.txt"
        rates = TOKEN_RATES.get(str(detail.get("effective_scenario")))
        if result.is_endpoints or rates is None:
            continue
        tokens, samples = (number(detail.get(k)) for k in rates)
        if None in (tokens, samples) or samples <= 0:
            continue
        implied = tokens / samples
        cap = performance_token_cap(result.facts)
        if cap is not None and not ctx.test_scale and implied > (cap + CAP_SLACK_TOKENS) * (1 + CAP_SLACK):
            findings.append(
                Finding(
                    "output-length-evidence",
                    where,
                    f"{rates[0]} {tokens:g} over {rates[1]} {samples:g} is {implied:.1f} tokens per sample, but "
                    f"{result.mlperf_benchmark}'s answers stop at {cap} new tokens: the mean cannot exceed the longest",
                    severity="warning" if ctx.division == "open" else "error",
                )
            )
        if not ctx.files.is_file(txt) or _own_sets(result):
            continue
        printed = dict(_PRINTED_COUNT.findall(ctx.files.read_text(txt)))
        try:
            measured = float(printed["tokens_per_sample"])
        except (KeyError, ValueError):
            continue
        if measured <= 0:
            continue
        if abs(implied / measured - 1) > OUTPUT_LENGTH_TOLERANCE:
            findings.append(
                Finding(
                    "output-length-evidence",
                    where,
                    f"{rates[0]} {tokens:g} over {rates[1]} {samples:g} is {implied:.1f} tokens per sample; "
                    f"{ctx.rel(txt)} measured tokens_per_sample {measured:g} on the same dataset "
                    f"({abs(implied / measured - 1):.1%} apart, at most {OUTPUT_LENGTH_TOLERANCE:.0%})",
                )
            )
    return findings + _scenarios_output_lengths(ctx)


def _scenarios_output_lengths(ctx: TreeContext) -> list[Finding]:
    """Each accuracy run's tokens_per_sample against the median of its model's on the system."""
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for result in ctx.results:
        txt = result.path / "accuracy" / "accuracy.txt"
        if result.is_endpoints or result.facts is None or not ctx.files.is_file(txt) or _own_sets(result):
            continue
        printed = dict(_PRINTED_COUNT.findall(ctx.files.read_text(txt)))
        try:
            measured = float(printed["tokens_per_sample"])
            model = result.facts.loadgen_model("Offline")
        except (KeyError, ValueError, UserError):
            continue
        if measured > 0:
            groups.setdefault((result.system, model), []).append((measured, ctx.rel(txt)))
    findings = []
    for (system, model), runs in groups.items():
        if len(runs) < 2:
            continue
        middle = statistics.median(value for value, _ in runs)
        for value, where in runs:
            if abs(value / middle - 1) > SCENARIOS_OUTPUT_TOLERANCE:
                findings.append(
                    Finding(
                        "output-length-evidence",
                        where,
                        f"tokens_per_sample {value:g}, but {model}'s other accuracy runs on {system} score "
                        f"{middle:g} (the median of {len(runs)}) on the same dataset: {abs(value / middle - 1):.1%} "
                        f"apart, at most {SCENARIOS_OUTPUT_TOLERANCE:.0%}",
                        severity="warning" if ctx.division == "open" else "error",
                    )
                )
    return findings


@rule(
    "accuracy-evidence",
    evidence=[
        cross_checked(
            ACCURACY_TXT, "gen_num", "the accuracy run's sample count (its detail log); present beside ROUGE scores"
        ),
        derived(ACCURACY_TXT, "tokens_per_sample", "its own gen_tok_len / gen_num; the whole log's token counts"),
        cross_checked(ACCURACY_TXT, "gen_tok_len", "tokens_per_sample x gen_num"),
        derived(ACCURACY_TXT, "hash", "the sha256 of the accuracy log, where it is whole"),
        cross_checked(ACCURACY_LOG, "token_count", "accuracy.txt's tokens_per_sample, where the log is whole"),
        derived(ACCURACY_TXT, "accuracy", "good / total on the same line (classification evaluators)"),
        cross_checked(ACCURACY_TXT, "good", "accuracy x total"),
        cross_checked(ACCURACY_TXT, "total", "good / accuracy; the accuracy run's sample count (its detail log)"),
        derived(ACCURACY_TXT, "Word Error Rate", "100 - its own accuracy on the same line (whisper's evaluator)"),
        derived(ACCURACY_TXT, "mAP", "100 x its COCO table's AP @[ IoU=0.50:0.95 ] (retinanet, yolo)"),
        cross_checked(
            ACCURACY_TXT,
            "Average Precision",
            "the table's other rows: AP over stricter IoUs at most AP @[ IoU=0.50 ]; recall rising with maxDets",
        ),
        derived(ACCURACY_TXT, "mean", "the mean of kidney and tumor DICE (3d-unet's evaluator)"),
        derived(
            ACCURACY_TXT,
            "FINAL SCORE",
            "its own Score / Max; each dataset row's Score and Accuracy from its Correct, Total and Repeats "
            "(the gpt-oss evaluator's report)",
        ),
        cross_checked(ACCURACY_TXT, "exact_match", "the report's own FINAL SCORE (gpt-oss: the figure judged)"),
        cross_checked(
            ACCURACY_TXT,
            "Total samples evaluated",
            "its dataset rows' Totals; the accuracy run's sample count (gpt-oss report); Overall raw accuracy's counts",
        ),
    ],
)
def check_accuracy_evidence(ctx: TreeContext) -> list[Finding]:
    """What accuracy.txt records against what the accuracy run logged: the samples it
    scored (gen_num) against the run's sample count, tokens_per_sample against its own
    gen_tok_len / gen_num, and, where the accuracy log is complete (not truncated: our
    test-scale runs), its hash line against the log's sha256 and the token counts against
    the logged samples."""
    findings = []
    for result in ctx.results:
        txt = result.path / "accuracy" / "accuracy.txt"
        if result.is_endpoints or not ctx.files.is_file(txt):
            continue
        text = ctx.files.read_text(txt)
        where = ctx.rel(txt)
        report = score_report_problems(text) + coco_problems(text) + kits_problems(text)
        if report:
            findings.append(
                Finding(
                    "accuracy-evidence", where, "the evaluator's report contradicts itself: " + "; ".join(report[:3])
                )
            )
        scored = report_sample_count(text)
        issued = issued_accuracy_samples(result.detail(ACC))
        if scored is not None and isinstance(issued, int) and not isinstance(issued, bool) and scored != issued:
            findings.append(
                Finding(
                    "accuracy-evidence",
                    where,
                    f"the report scores {scored} samples (Total samples evaluated); {ctx.rel(result.log_path(ACC))} "
                    f"records an accuracy run of {issued}: a dataset or samples left out of the score",
                )
            )
        printed = {}
        for name, value in _PRINTED_COUNT.findall(text):
            try:
                printed[name] = float(value)
            except ValueError:
                continue
        detail = result.detail(ACC)
        count = issued_accuracy_samples(detail)
        if "gen_num" not in printed and _ROUGE_REPORT.search(text):
            # Every published ROUGE evaluator's line (1,144 accuracy.txt files of v6.0 and v5.1)
            # prints how many samples it scored: without it the scores rest on an unknown set.
            findings.append(
                Finding(
                    "accuracy-evidence",
                    where,
                    "prints ROUGE scores without gen_num, the count of samples the evaluator scored, which it "
                    "always prints: a line removed from the evaluator's output",
                    severity="warning" if ctx.division == "open" else "error",
                )
            )
        if (
            "gen_num" in printed
            and isinstance(count, int)
            and not isinstance(count, bool)
            and printed["gen_num"] != count
        ):
            findings.append(
                Finding(
                    "accuracy-evidence",
                    where,
                    f"scores gen_num {printed['gen_num']:g} samples; {ctx.rel(result.log_path(ACC))} records an "
                    f"accuracy run of {count}",
                )
            )
        if {"gen_num", "gen_tok_len", "tokens_per_sample"} <= printed.keys() and printed["gen_num"] > 0:
            mean = printed["gen_tok_len"] / printed["gen_num"]
            if abs(mean - printed["tokens_per_sample"]) > 0.051:
                findings.append(
                    Finding(
                        "accuracy-evidence",
                        where,
                        f"tokens_per_sample {printed['tokens_per_sample']:g} is not its own gen_tok_len / gen_num "
                        f"= {mean:.2f}",
                    )
                )
        counted = _GOOD_TOTAL.search(text)
        if counted:
            percent, good, total = float(counted.group(1)), int(counted.group(2)), int(counted.group(3))
            if total and abs(good / total * 100 - percent) > 0.0015:
                findings.append(
                    Finding(
                        "accuracy-evidence",
                        where,
                        f"accuracy={percent}% but good={good} of total={total} is {good / total * 100:.3f}%",
                    )
                )
            # (Where the line is the classification evaluator's own: dlrm's "AUC=..., accuracy=...,
            # good=..., total=..." counts user-item pairs, not samples.)
            own_line = counted.start() == 0 or text[counted.start() - 1] == "\n"
            if own_line and isinstance(count, int) and not isinstance(count, bool) and total != count:
                findings.append(
                    Finding(
                        "accuracy-evidence",
                        where,
                        f"scores total={total} samples; {ctx.rel(result.log_path(ACC))} records an accuracy run of "
                        f"{count}: the scores are not of this run's every sample",
                        # (A warning in the open division, whose accuracy is recorded, not judged:
                        # v5.1 open/Lenovo's resnet50 scores 962 images in each scenario.)
                        severity="warning" if ctx.division == "open" else "error",
                    )
                )
        error_rate = _WER.search(text)
        if error_rate and abs(float(error_rate.group(1)) + float(error_rate.group(2)) - 100) > 0.0015:
            findings.append(
                Finding(
                    "accuracy-evidence",
                    where,
                    f"Word Error Rate {error_rate.group(1)}% beside accuracy={error_rate.group(2)}%: the evaluator "
                    "prints accuracy as 100 - WER",
                )
            )
        log = result.path / "accuracy" / "mlperf_log_accuracy.json"
        if not ctx.files.is_file(log):
            continue
        raw = ctx.files.read_bytes(log)
        entries = accuracy_entries(ctx, log)
        if entries is None:
            continue  # truncated: the hash is of the original, which is not in the tree
        digest = HASH_LINE.search(text)
        actual = hashlib.sha256(raw).hexdigest()
        if digest and digest.group(1) != actual:
            findings.append(
                Finding(
                    "accuracy-evidence",
                    where,
                    f"hash={digest.group(1)}, but {ctx.rel(log)} is complete and its sha256 is {actual}",
                )
            )
        if isinstance(count, int) and not isinstance(count, bool) and len(entries) != count:
            findings.append(
                Finding(
                    "accuracy-evidence",
                    ctx.rel(log),
                    f"is complete and logs {len(entries)} samples; {ctx.rel(result.log_path(ACC))} records {count}",
                )
            )
        counts = [e.get("token_count") for e in entries]
        if "tokens_per_sample" in printed and counts and all(isinstance(c, int) for c in counts):
            mean = sum(counts) / len(counts)
            if abs(mean - printed["tokens_per_sample"]) > 0.051:
                findings.append(
                    Finding(
                        "accuracy-evidence",
                        where,
                        f"tokens_per_sample {printed['tokens_per_sample']:g}, but the {len(counts)} samples of "
                        f"{ctx.rel(log)} average {mean:.2f} tokens",
                    )
                )
    return findings


@rule("accuracy-isolation")
def check_accuracy_isolation(ctx: TreeContext) -> list[Finding]:
    """An accuracy score whose model-written code ran without namespaces or a system-call filter
    (accepted by the config's sandbox.allow_unsandboxed; its accuracy.txt says so): valid as a
    score, but the machine ran untrusted code unguarded."""
    findings = []
    for result in ctx.results:
        txt = result.path / "accuracy" / "accuracy.txt"
        if ctx.files.is_file(txt) and UNSANDBOXED_NOTE in ctx.files.read_text(txt):
            findings.append(
                Finding(
                    "accuracy-isolation",
                    ctx.rel(txt),
                    f"accuracy {UNSANDBOXED_NOTE}: model-written code ran without namespaces or a seccomp filter "
                    f"({UNSANDBOXED_CONFIG_KEY})",
                    "warning",
                )
            )
    return findings
