"""Mutation benchmark for the submission check: one defect at a time in a tree both
checkers accept, and which checker catches it.

    python bench/checker_mutations.py BASE_SUBMITTER_DIR [BASE...] --inference CHECKOUT
        [--round v6.0] [--generated | --generated-only] [--json OUT.json]

BASE_SUBMITTER_DIR is a submitter folder (``<division>/<submitter>``) that both our check
and the official MLCommons checker accept, for example a published
``closed/AMD`` of the v6.0 results. CHECKOUT is a checkout of mlcommons/inference (the
official checker is its tools/submission/submission_checker, run with --version ROUND).

The unmodified copy is checked first; if either checker rejects it the benchmark stops.
Then, for each defect below, the base is copied (not linked: the defect edits it) into a
fresh view ``<tmp>/<division>/<submitter>/``, the one defect is applied to one result (an
LLM benchmark's Offline, Server or Interactive folder, chosen by what the base holds), our
``check_tree`` runs in process and the official checker as a subprocess. A defect counts
as caught by ours when there is an error finding, and by the official checker when it does
not end with "submission looks OK" and exit 0 (a crash counts as caught; it is marked). Our
finding must also name the mutated file or its result folder.

With ``--generated``, the mutations generated from the round's rules table
(bench/generated_mutations.py: every required file and field, every numeric limit crossed
just past its bound, every twice-recorded value made to disagree) run too, on every base
given, and a table per rule of the table says how many each checker caught, submitter by
submitter.

Prints a Markdown table and the totals; ``--json`` writes the rows. Exit 1 if ours misses
a hand-written defect (or catches it without naming the file), or a generated one the
official checker catches; 2 if a base is not accepted.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from official_checker import run_official  # noqa: E402  (bench/, the script's folder)

from mlperf_repro.benchmarks import Benchmark, Round, load_round  # noqa: E402
from mlperf_repro.check.tree import check_tree  # noqa: E402

MLLOG = ":::MLLOG"
PERF = "performance/run_1"
LLM_PREFERENCE = ("llama2-70b-99", "llama2-70b-99.9", "gpt-oss-120b")
SCENARIOS = ("Offline", "Server", "Interactive", "SingleStream", "MultiStream")
# The prefix of one accuracy-log entry (LoadGen writes one per line).
ENTRY = re.compile(r'\{\s*"seq_id"\s*:\s*(\d+)\s*,\s*"qsl_idx"\s*:\s*(\d+)')


# -- the target: which results of the view a defect edits ------------------------------------


@dataclass
class Target:
    root: Path  # the view (holds <division>/<submitter>)
    division: str
    submitter: str
    system: str
    benchmark: str  # the folder name
    facts: Benchmark
    rules: Round
    folders: dict[str, str] = field(default_factory=dict)  # scenario -> folder name as in the base

    @property
    def base(self) -> Path:
        return self.root / self.division / self.submitter

    @property
    def bench_dir(self) -> Path:
        return self.base / "results" / self.system / self.benchmark

    def result(self, scenario: str) -> Path | None:
        name = self.folders.get(scenario)
        return self.bench_dir / name if name else None

    def latency_result(self) -> Path | None:
        """A folder LoadGen ran as Server (Server, else Interactive)."""
        return self.result("Server") or self.result("Interactive")

    def system_json(self) -> Path:
        return self.base / "systems" / f"{self.system}.json"

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def pick_target(base: Path, rules: Round, benchmark: str | None = None) -> Target:
    """The LLM benchmark folder with the most scenarios (the table's preferred benchmarks
    first), or of the benchmark asked for; a submitter without an LLM result (an edge
    submitter's vision results) gets its benchmark with the most scenarios."""
    division = base.parent.name if base.parent.name in rules["divisions"] else "closed"
    candidates = []
    for bench_dir in sorted((base / "results").glob("*/*")):
        official = rules.mlperf_benchmark(bench_dir.name, {}) if bench_dir.is_dir() else None
        if official not in rules.benchmark_names or (benchmark and bench_dir.name != benchmark):
            continue
        facts = rules.benchmark(official)
        folders = {}
        for scenario_dir in bench_dir.iterdir():
            for scenario in SCENARIOS:
                if scenario_dir.is_dir() and scenario_dir.name.lower() == scenario.lower():
                    folders[scenario] = scenario_dir.name
        if "Offline" not in folders:
            continue
        preference = LLM_PREFERENCE.index(facts.name) if facts.name in LLM_PREFERENCE else len(LLM_PREFERENCE)
        rank = (not facts.is_llm, -len(folders), preference, bench_dir.parent.name, bench_dir.name)
        candidates.append((rank, facts, folders))
    if not candidates:
        raise SystemExit(f"{base} holds no {benchmark or 'benchmark'} with an Offline result to mutate")
    (_, _, _, system, bench), facts, folders = min(candidates, key=lambda c: c[0])
    return Target(Path(), division, base.name, system, bench, facts, rules, folders)


# -- editing LoadGen logs ---------------------------------------------------------------------


def edit_detail(path: Path, values: dict | None = None, drop: set[str] = frozenset(), append: list[dict] = ()) -> None:
    """Rewrite ``mlperf_log_detail.txt`` record by record: set values by key, drop keys,
    append records."""
    values = values or {}
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(MLLOG):
            record = json.loads(line[len(MLLOG) :])
            if record.get("key") in drop:
                continue
            if record.get("key") in values:
                record["value"] = values[record["key"]]
                line = f"{MLLOG} {json.dumps(record)}"
        out.append(line)
    for record in append:
        out.append(f"{MLLOG} {json.dumps(record)}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def detail_value(path: Path, key: str):
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(MLLOG) and f'"{key}"' in line:
            record = json.loads(line[len(MLLOG) :])
            if record.get("key") == key:
                return record["value"]
    return None


def edit_summary(path: Path, lines: dict[str, str | None]) -> None:
    """``label : value`` lines of ``mlperf_log_summary.txt``: a new value, or None to drop
    the line (a label the summary lacks is left alone)."""
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8")
    for label, value in lines.items():
        pattern = re.compile(rf"^(\s*{re.escape(label)}\s*:\s*).*\n?", re.MULTILINE)
        text = pattern.sub(lambda m, v=value: "" if v is None else f"{m.group(1)}{v}\n", text, count=1)
    path.write_text(text, encoding="utf-8")


def replace_text(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    if old not in text:
        raise RuntimeError(f"{path}: '{old}' not found")
    path.write_text(text.replace(old, new), encoding="utf-8")


def set_metric(path: Path, pattern: str, value: float, metric: str) -> None:
    """Rewrite every value the checker's pattern reads in accuracy.txt; where it reads none
    (gpt-oss prints no tokens_per_sample), print one before the hash line."""
    text = path.read_text(encoding="utf-8")
    regex = re.compile(pattern)
    out, found = [], False
    for line in text.splitlines(keepends=True):
        match = regex.search(line)
        if match:
            found = True
            line = line[: match.start(1)] + f"{value:.4f}" + line[match.end(1) :]
        elif not found and line.startswith("hash="):
            out.append(f"'{metric}': {value:.4f}\n\n")
            found = True
        out.append(line)
    if not found or not regex.search("".join(out)):
        raise RuntimeError(f"{path}: no value matches {pattern}")
    path.write_text("".join(out), encoding="utf-8")


def edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=4))


def error_record(key: str, message: str) -> dict:
    return {
        "key": key,
        "value": message,
        "time_ms": 1.0,
        "namespace": "mlperf::logging",
        "event_type": "POINT_IN_TIME",
        "metadata": {"is_error": True, "is_warning": False, "file": "logging.cc", "line_no": 1},
    }


# -- the defects --------------------------------------------------------------------------------
# Each takes the target, applies one defect to the view and returns the paths (relative to
# the view) our finding may name: the mutated file's result folder, or the file itself where
# it sits outside results/. None: the base has nothing this defect applies to.

Defect = Callable[[Target], "list[str] | None"]
DEFECTS: list[tuple[str, str, Defect]] = []


def defect(name: str, description: str):
    def register(function: Defect) -> Defect:
        DEFECTS.append((name, description, function))
        return function

    return register


@defect("invalid-run", "LoadGen marked the Offline performance run INVALID")
def invalid_run(t: Target):
    result = t.result("Offline")
    edit_detail(result / PERF / "mlperf_log_detail.txt", {"result_validity": "INVALID"})
    edit_summary(result / PERF / "mlperf_log_summary.txt", {"Result is": "INVALID"})
    return [t.rel(result)]


@defect("wrong-seed", "the Offline run used a qsl_rng_seed not of this round")
def wrong_seed(t: Target):
    result = t.result("Offline")
    seed = int(t.rules.seeds["qsl_rng_seed"]) + 1
    edit_detail(result / PERF / "mlperf_log_detail.txt", {"effective_qsl_rng_seed": seed})
    edit_summary(result / PERF / "mlperf_log_summary.txt", {"qsl_rng_seed": str(seed)})
    return [t.rel(result)]


@defect("missing-seed", "the Offline log has no effective_sample_index_rng_seed record")
def missing_seed(t: Target):
    result = t.result("Offline")
    edit_detail(result / PERF / "mlperf_log_detail.txt", drop={"effective_sample_index_rng_seed"})
    edit_summary(result / PERF / "mlperf_log_summary.txt", {"sample_index_rng_seed": None})
    return [t.rel(result)]


@defect("accuracy-no-hash", "accuracy.txt without its hash= line")
def accuracy_no_hash(t: Target):
    result = t.result("Offline")
    txt = result / "accuracy" / "accuracy.txt"
    txt.write_text(re.sub(r"^hash=.*\n?", "", txt.read_text(), flags=re.MULTILINE))
    return [t.rel(result)]


@defect("accuracy-log-not-truncated", "mlperf_log_accuracy.json over the size limit (not truncated)")
def accuracy_log_not_truncated(t: Target):
    result = t.result("Offline")
    log = result / "accuracy" / "mlperf_log_accuracy.json"
    text = log.read_text()
    entries = ENTRY.findall(text)
    used = {int(q) for _, q in entries}
    seq = max(int(s) for s, _ in entries) + 1
    fresh = (q for q in range(t.facts.facts["accuracy_sample_count"]) if q not in used)
    limit = int(t.rules["accuracy_log_max_bytes"])
    lines = []
    while len(text) + sum(map(len, lines)) <= limit + 1024:
        lines.append(
            f'{{ "seq_id" : {seq}, "qsl_idx" : {next(fresh)}, "data" : "{"0D000000" * 64}", "token_count" : 64 }},\n'
        )
        seq += 1
    # The untruncated middle of the log, where truncation left "...".
    log.write_text(text.replace("\n\n...\n\n", "\n" + "".join(lines), 1))
    return [t.rel(result)]


def _target_metric(t: Target) -> tuple[str, float]:
    targets = t.facts.absolute_targets()
    metric = next(m for m in t.facts.accuracy["targets"] if m in targets)
    return metric, targets[metric]


@defect("accuracy-below-target", "accuracy.txt reports the first metric 2% below its target")
def accuracy_below_target(t: Target):
    result = t.result("Offline")
    metric, target = _target_metric(t)
    set_metric(result / "accuracy" / "accuracy.txt", t.facts.accuracy["regex"][metric], target * 0.98, metric)
    return [t.rel(result)]


@defect("tokens-per-sample-too-high", "tokens_per_sample 5% above the upper bound")
def tokens_per_sample_too_high(t: Target):
    bounds = t.facts.upper_bounds()
    if "tokens_per_sample" not in bounds:
        return None
    result = t.result("Offline")
    set_metric(
        result / "accuracy" / "accuracy.txt",
        t.facts.accuracy["regex"]["tokens_per_sample"],
        bounds["tokens_per_sample"] * 1.05,
        "tokens_per_sample",
    )
    return [t.rel(result)]


@defect("interactive-over-interactive-limits", "Interactive p99 TTFT/TPOT over the Interactive limits, under Server's")
def interactive_latency(t: Target):
    result = t.result("Interactive")
    interactive, server = t.facts.latency_limits_ms("Interactive"), t.facts.latency_limits_ms("Server")
    if result is None or not interactive or not server:
        return None
    ttft = int((interactive["ttft"] + server["ttft"]) / 2 * 1e6)
    tpot = int((interactive["tpot"] + server["tpot"]) / 2 * 1e6)
    edit_detail(
        result / PERF / "mlperf_log_detail.txt",
        {
            "result_first_token_99.00_percentile_latency_ns": ttft,
            "result_time_per_output_token_99.00_percentile_ns": tpot,
        },
    )
    edit_summary(
        result / PERF / "mlperf_log_summary.txt",
        {
            "99.00 percentile first token latency (ns)": str(ttft),
            "99.00 percentile time to output token (ns)": str(tpot),
        },
    )
    return [t.rel(result)]


@defect("interactive-under-server-name", "an Interactive run made under the Server model name (Server TTFT/TPOT asked)")
def interactive_under_server_name(t: Target):
    result = t.result("Interactive")
    server = t.facts.latency_limits_ms("Server")
    if result is None or not server:
        return None
    ttft, tpot = int(server["ttft"] * 1e6), int(server["tpot"] * 1e6)
    edit_detail(
        result / PERF / "mlperf_log_detail.txt",
        {"requested_server_ttft_latency": ttft, "requested_server_tpot_latency": tpot},
    )
    edit_summary(
        result / PERF / "mlperf_log_summary.txt", {"ttft_latency (ns)": str(ttft), "tpot_latency (ns)": str(tpot)}
    )
    return [t.rel(result)]


def _compliance(t: Target) -> tuple[Path, str] | None:
    result = t.latency_result() or t.result("Offline")
    tests = [test for test in t.facts.compliance_tests if (result / test).is_dir()]
    return (result, tests[0]) if tests else None


@defect("compliance-folder-missing", "the first compliance test's folder (TEST06/TEST07) removed")
def compliance_folder_missing(t: Target):
    found = _compliance(t)
    if found is None:
        return None
    result, test = found
    shutil.rmtree(result / test)
    return [t.rel(result)]


@defect("compliance-failed", "the compliance verify file reports a failure (TEST06: EOS False; else no TEST PASS)")
def compliance_failed(t: Target):
    found = _compliance(t)
    if found is None:
        return None
    result, test = found
    verify = result / test / t.rules.compliance_test(test)["verify_file"]
    if test == "TEST06":
        replace_text(verify, "EOS check pass: True", "EOS check pass: False")
    else:
        replace_text(verify, "TEST PASS", "TEST FAIL")
    return [t.rel(result)]


@defect("compliance-verify-missing", "the compliance test's verify file removed")
def compliance_verify_missing(t: Target):
    found = _compliance(t)
    if found is None:
        return None
    result, test = found
    (result / test / t.rules.compliance_test(test)["verify_file"]).unlink()
    return [t.rel(result)]


@defect("measurements-no-weight-types", "measurements.json without weight_data_types")
def measurements_no_weight_types(t: Target):
    result = t.result("Offline")
    edit_json(result / "measurements.json", lambda d: d.pop("weight_data_types", None))
    return [t.rel(result)]


@defect("measurements-invalid-json", "measurements.json is not valid JSON (cut short)")
def measurements_invalid_json(t: Target):
    result = t.result("Offline")
    path = result / "measurements.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    return [t.rel(result)]


@defect("system-name-mismatch", "a results/<system> folder whose systems/<system>.json does not exist")
def system_name_mismatch(t: Target):
    renamed = f"{t.system}_renamed"
    (t.base / "results" / t.system).rename(t.base / "results" / renamed)
    return [
        t.rel(t.base / "results" / renamed),
        t.rel(t.base / "systems" / f"{renamed}.json"),
    ]


@defect("duplicated-sample", "the accuracy log holds one qsl_idx twice (the last readable entry repeats the first)")
def duplicated_sample(t: Target):
    result = t.result("Offline")
    log = result / "accuracy" / "mlperf_log_accuracy.json"
    text = log.read_text()
    matches = list(ENTRY.finditer(text))
    if len(matches) < 2 or matches[0].group(1) == matches[-1].group(1):
        return None
    last = matches[-1]
    log.write_text(text[: last.start(2)] + matches[0].group(2) + text[last.end(2) :])
    return [t.rel(result)]


@defect("run-too-short", "the Server run's min_duration half the round's")
def run_too_short(t: Target):
    result = t.latency_result()
    if result is None:
        return None
    value = t.rules.min_duration_ms // 2
    edit_detail(result / PERF / "mlperf_log_detail.txt", {"effective_min_duration_ms": value})
    edit_summary(result / PERF / "mlperf_log_summary.txt", {"min_duration (ms)": str(value)})
    return [t.rel(result)]


@defect("performance-sample-count-low", "performance_sample_count half the table's")
def performance_sample_count_low(t: Target):
    result = t.result("Offline")
    needed = t.facts.facts.get("checker_min_performance_sample_count", t.facts.facts["performance_sample_count"])
    value = needed // 2
    edit_detail(result / PERF / "mlperf_log_detail.txt", {"effective_performance_sample_count": value})
    edit_summary(result / PERF / "mlperf_log_summary.txt", {"performance_sample_count": str(value)})
    return [t.rel(result)]


@defect("offline-samples-per-query-low", "Offline samples_per_query half the minimum")
def offline_samples_per_query_low(t: Target):
    result = t.result("Offline")
    value = int(t.facts.facts["offline_min_samples_per_query"]) // 2
    edit_detail(result / PERF / "mlperf_log_detail.txt", {"effective_samples_per_query": value})
    edit_summary(result / PERF / "mlperf_log_summary.txt", {"samples_per_query": str(value)})
    return [t.rel(result)]


@defect("loadgen-error", "a LoadGen error record in the Server performance log")
def loadgen_error(t: Target):
    result = t.latency_result() or t.result("Offline")
    detail = result / PERF / "mlperf_log_detail.txt"
    edit_detail(
        detail,
        {"num_errors": 1},
        append=[error_record("error_runtime", "QuerySamplesComplete called with an unknown response id")],
    )
    summary = result / PERF / "mlperf_log_summary.txt"
    text = summary.read_text().replace("No errors encountered during test.", "1 ERROR encountered. See detailed log.")
    summary.write_text(text)
    return [t.rel(result)]


@defect("user-conf-removed", "the Offline folder's user.conf removed")
def user_conf_removed(t: Target):
    result = t.result("Offline")
    (result / "user.conf").unlink()
    return [t.rel(result)]


@defect("offline-removed", "the benchmark's required Offline scenario removed")
def offline_removed(t: Target):
    shutil.rmtree(t.result("Offline"))
    return [t.rel(t.bench_dir)]


def _system(t: Target, change: Callable[[dict], None]) -> list[str]:
    edit_json(t.system_json(), change)
    return [t.rel(t.system_json())]


@defect("status-released", 'system status "released" (not available/preview/rdi)')
def status_released(t: Target):
    return _system(t, lambda d: d.update(status="released"))


@defect("system-type-cloud", 'system_type "cloud"')
def system_type_cloud(t: Target):
    return _system(t, lambda d: d.update(system_type="cloud"))


@defect("system-field-removed", "a required system-description field (host_storage_type) removed")
def system_field_removed(t: Target):
    return _system(t, lambda d: d.pop("host_storage_type", None))


@defect("is-network-in-closed", 'is_network "true" in a closed-division system description')
def is_network_in_closed(t: Target):
    if t.division != "closed":
        return None
    return _system(t, lambda d: d.update(is_network="true"))


@defect("retraining-in-closed", 'measurements.json says retraining "Yes" in the closed division')
def retraining_in_closed(t: Target):
    if t.division != "closed":
        return None
    result = t.result("Offline")
    edit_json(result / "measurements.json", lambda d: d.update(retraining="Yes"))
    return [t.rel(result)]


@defect("dot-file", "a .DS_Store in a result folder")
def dot_file(t: Target):
    result = t.result("Offline")
    (result / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    return [t.rel(result)]


@defect("file-over-size-limit", "a LoadGen trace just over the tree's file-size limit (sparse)")
def file_over_size_limit(t: Target):
    result = t.result("Offline")
    with open(result / PERF / "mlperf_log_trace.json", "wb") as handle:
        handle.truncate(int(t.rules["tree_limits"]["max_file_bytes"]) + 1)
    return [t.rel(result)]


@defect("no-token-latencies", "the Offline run did not request use_token_latencies")
def no_token_latencies(t: Target):
    result = t.result("Offline")
    edit_detail(result / PERF / "mlperf_log_detail.txt", {"requested_use_token_latencies": False})
    return [t.rel(result)]


@defect("server-holds-offline-log", "the Server folder's performance logs are the Offline run's")
def server_holds_offline_log(t: Target):
    result = t.latency_result()
    if result is None:
        return None
    for log in (t.result("Offline") / PERF).iterdir():
        shutil.copyfile(log, result / PERF / log.name)
    return [t.rel(result)]


@defect("early-stopping-not-met", "the Server run's early stopping not met (result still VALID)")
def early_stopping_not_met(t: Target):
    result = t.latency_result()
    if result is None:
        return None
    edit_detail(result / PERF / "mlperf_log_detail.txt", {"early_stopping_met": False})
    edit_summary(result / PERF / "mlperf_log_summary.txt", {"Early stopping satisfied": "No"})
    return [t.rel(result)]


@defect("accuracy-run-short", "the accuracy run covered half the dataset")
def accuracy_run_short(t: Target):
    result = t.result("Offline")
    detail = result / "accuracy" / "mlperf_log_detail.txt"
    value = int(t.facts.facts["accuracy_sample_count"]) // 2
    present = [
        k
        for k in ("effective_accuracy_sample_count", "qsl_reported_total_count")
        if detail_value(detail, k) is not None
    ]
    edit_detail(detail, dict.fromkeys(present, value))
    return [t.rel(result)]


@defect("division-mismatch", 'the system description says division "open" in closed/')
def division_mismatch(t: Target):
    other = next(d for d in t.rules["divisions"] if d != t.division)
    return _system(t, lambda d: d.update(division=other))


# Looser than every LLM's Server target in the official checker's table, for a round
# table that gives none.
FALLBACK_LOOSE_TARGET_MS = 120_000


@defect("target-latency-too-loose", "the Server run judged against twice the round's target latency")
def target_latency_too_loose(t: Target):
    result = t.latency_result()
    if result is None:
        return None
    target = (t.facts.latency_limits_ms("Server") or {}).get("target")
    value = int((target * 2 if target else FALLBACK_LOOSE_TARGET_MS) * 1_000_000)
    edit_detail(result / PERF / "mlperf_log_detail.txt", {"effective_target_latency_ns": value})
    edit_summary(result / PERF / "mlperf_log_summary.txt", {"target_latency (ns)": str(value)})
    return [t.rel(result)]


# -- running both checkers ----------------------------------------------------------------------


def official_check(checkout: Path, view: Path, round_name: str, submitter: str) -> dict:
    run = run_official(checkout, view, round_name, submitter)
    return {"ok": run.ok, "returncode": run.returncode, "errors": run.errors, "crash": run.crash}


def view_of(base: Path, tmp: Path, division: str) -> Path:
    view = tmp / "view"
    (view / division).mkdir(parents=True)
    shutil.copytree(base, view / division / base.name, symlinks=True)
    return view


def run_defect(name, description, function, base, args, rules, template: Target) -> dict:
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        view = view_of(base, Path(tmp), template.division)
        target = Target(view, **{k: v for k, v in template.__dict__.items() if k != "root"})
        names = function(target)
        row = {"defect": name, "description": description}
        if names is None:
            return row | {"applies": False}
        findings = check_tree(view, rules)
        errors = [f for f in findings if f.severity == "error"]
        named = any(f.path == n or f.path.startswith(n.rstrip("/") + "/") for f in errors for n in names)
        official = official_check(args.inference, view, args.round, template.submitter)
    return row | {
        "applies": True,
        "mutated": names,
        "ours": bool(errors),
        "our_rules": sorted({f.rule for f in errors}),
        "names_mutated": named,
        "our_findings": [f.line() for f in errors][:10],
        "official": not official["ok"],
        "official_crash": official["crash"],
        "official_errors": official["errors"][:5],
    }


def accepted(base: Path, args, rules: Round, template: Target) -> bool:
    """Both checkers accept the unmodified copy (else the base is no base: say why)."""
    with tempfile.TemporaryDirectory(prefix="mutation-base-") as tmp:
        view = view_of(base, Path(tmp), template.division)
        ours = [f for f in check_tree(view, rules) if f.severity == "error"]
        official = official_check(args.inference, view, args.round, template.submitter)
    if ours or not official["ok"]:
        print(f"{base} is not a valid base: both checkers must accept the unmodified copy.", file=sys.stderr)
        for finding in ours[:20]:
            print(f"  ours: {finding.line()}", file=sys.stderr)
        if not official["ok"]:
            print(
                f"  official: rejected ({official['crash'] or 'exit ' + str(official['returncode'])})", file=sys.stderr
            )
            for line in official["errors"][:20]:
                print(f"  official: {line}", file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bases", type=Path, nargs="+", help="submitter folders both checkers accept")
    parser.add_argument("--inference", type=Path, required=True, help="a checkout of mlcommons/inference")
    parser.add_argument("--round", default="v6.0")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--only", action="append", help="run only these defects (by name)")
    parser.add_argument("--benchmark", help="mutate this benchmark's results (default: the LLM with most scenarios)")
    parser.add_argument("--generated", action="store_true", help="also the mutations generated from the rules table")
    parser.add_argument("--generated-only", action="store_true", help="only the generated mutations")
    args = parser.parse_args(argv)
    rules = load_round(args.round)
    report, out, failed = [], [], False
    for base in (b.resolve() for b in args.bases):
        template = pick_target(base, rules, args.benchmark)
        start = time.perf_counter()
        if not accepted(base, args, rules, template):
            return 2
        rows = []
        if not args.generated_only:
            defects = [d for d in DEFECTS if not args.only or d[0] in args.only]
            rows = [run_defect(*d, base, args, rules, template) for d in defects]
        generated = []
        if args.generated or args.generated_only:
            from generated_mutations import generate

            for name, rule, what, apply in generate(template, base):
                if not args.only or name in args.only:
                    generated.append(run_defect(name, what, apply, base, args, rules, template) | {"rule": rule})
        seconds = time.perf_counter() - start
        if rows:
            report.append(render(rows, template, args, seconds))
        if generated:
            report.append(render_generated(generated, template, args, seconds))
        applied = [r for r in rows if r["applies"]]
        failed |= any(not (r["ours"] and r["names_mutated"]) for r in applied)
        failed |= any(r["official"] and not (r["ours"] and r["names_mutated"]) for r in generated if r["applies"])
        out.append(
            {
                "base": str(base),
                "round": args.round,
                "target": f"{template.system}/{template.benchmark} {sorted(template.folders)}",
                "seconds": round(seconds, 1),
                "rows": rows,
                "generated": generated,
            }
        )
    print("\n\n".join(report))
    if args.json:
        args.json.write_text(json.dumps(out if len(out) > 1 else out[0], indent=2))
    return 1 if failed else 0


def render_generated(rows: list[dict], target: Target, args, seconds: float) -> str:
    """Per rule of the table: mutations applied, caught by ours, by the official checker."""
    by_rule: dict[str, list[dict]] = {}
    for r in rows:
        if r["applies"]:
            by_rule.setdefault(r["rule"], []).append(r)
    lines = [
        f"# Generated mutations: {target.division}/{target.submitter}, round {args.round}",
        "",
        f"Mutated results: results/{target.system}/{target.benchmark}/"
        f"{{{', '.join(target.folders[s] for s in SCENARIOS if s in target.folders)}}}",
        "",
        "| rule of the table | mutations | ours | official | official only |",
        "|---|---:|---:|---:|---|",
    ]
    for rule, selected in by_rule.items():
        ours = sum(r["ours"] and r["names_mutated"] for r in selected)
        official = sum(r["official"] for r in selected)
        only = [r["defect"] for r in selected if r["official"] and not (r["ours"] and r["names_mutated"])]
        lines.append(f"| {rule} | {len(selected)} | {ours} | {official} | {', '.join(only) or '-'} |")
    applied = [r for sel in by_rule.values() for r in sel]
    lines += [
        "",
        f"{len(applied)} generated mutations applied ({len(rows) - len(applied)} did not apply to this base): "
        f"ours caught {sum(r['ours'] and r['names_mutated'] for r in applied)}, the official checker "
        f"{sum(r['official'] for r in applied)}; {seconds:.0f} s for the base.",
    ]
    missed = [r for r in applied if not (r["ours"] and r["names_mutated"])]
    if missed:
        lines += ["", f"Ours misses ({len(missed)}):", ""]
        lines += [
            f"- {r['defect']}: {r['description']}" + (" (official: caught)" if r["official"] else "") for r in missed
        ]
    return "\n".join(lines)


def render(rows: list[dict], target: Target, args, seconds: float) -> str:
    def ours(r):
        if not r["ours"]:
            return "**missed**"
        return "caught" if r["names_mutated"] else "caught (names another file)"

    def official(r):
        if not r["official"]:
            return "**missed**"
        return f"caught (crash: {r['official_crash'][:60]})" if r["official_crash"] else "caught"

    lines = [
        f"# Checker mutations: {target.division}/{target.submitter}, round {args.round}",
        "",
        f"Mutated results: results/{target.system}/{target.benchmark}/"
        f"{{{', '.join(target.folders[s] for s in SCENARIOS if s in target.folders)}}}",
        "",
        "| # | defect | what | ours | official | our rule |",
        "|---:|---|---|---|---|---|",
    ]
    applied = [r for r in rows if r["applies"]]
    for i, r in enumerate(rows, 1):
        if not r["applies"]:
            lines.append(
                f"| {i} | {r['defect']} | {r['description']} | n/a | n/a | (the base has nothing to apply it to) |"
            )
            continue
        lines.append(
            f"| {i} | {r['defect']} | {r['description']} | {ours(r)} | {official(r)} | {', '.join(r['our_rules']) or '-'} |"
        )
    ours_caught = sum(r["ours"] and r["names_mutated"] for r in applied)
    official_caught = sum(r["official"] for r in applied)
    lines += [
        "",
        f"{len(applied)} defects applied: ours caught {ours_caught} (naming the mutated file or its result folder), "
        f"the official checker {official_caught}; {seconds:.0f} s in all.",
    ]
    for title, selected in (
        ("Ours misses", [r for r in applied if not (r["ours"] and r["names_mutated"])]),
        ("The official checker misses", [r for r in applied if not r["official"]]),
        ("The official checker crashes on", [r for r in applied if r["official"] and r["official_crash"]]),
    ):
        if selected:
            lines += ["", f"{title} ({len(selected)}):", ""]
            lines += [f"- {r['defect']}: {r['description']}" for r in selected]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
