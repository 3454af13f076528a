"""Mutations generated from the round's rules table, for bench/checker_mutations.py.

One mutation per rule of the table, each applied alone to a copy of a published
submitter: every required file and folder removed; every required field of a system
description or measurements file removed or emptied (and the integer ones made text);
every numeric limit crossed just past its bound (run length, sample counts, latency
limits, accuracy targets and upper bounds, the accuracy-log and file-size limits, the
seeds); every value a tree records twice made to disagree with its other record (each
figure the performance summary prints that the detail log records, each user.conf
setting LoadGen logged, the scores of the compliance verify files, accuracy.txt's counts);
and the layout (tree_layout) broken one way at a time: a result folder twice in two cases,
a second run, a second copy of each record, a stray file, a link, a hard link, a FIFO.

Each generator yields (name, rule of the table, what, apply), ``apply(target)`` returning
the paths (relative to the view) a finding must name, or None where it does not apply.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from checker_mutations import PERF, SCENARIOS, Target, detail_value, edit_detail, edit_json, edit_summary, set_metric

from mlperf_repro.loadgen_logs import parse_summary, summary_key
from mlperf_repro.published.loadgen_conf import parse_conf, requested_settings

Mutation = tuple[str, str, str, Callable[[Target], "list[str] | None"]]
SUMMARY = "mlperf_log_summary.txt"
DETAIL = "mlperf_log_detail.txt"


def _result(t: Target, scenario: str = "Offline") -> Path | None:
    return t.result(scenario)


# -- required files and folders -------------------------------------------------------------------


def required_files(t: Target) -> Iterator[Mutation]:
    for name in t.rules["submitter_folders"]:

        def apply(t: Target, name=name):
            shutil.rmtree(t.base / name)
            return [t.rel(t.base)]

        yield f"remove:{name}/", "submitter_folders", f"the submitter's {name}/ folder removed", apply
    for name in t.rules["scenario_files"]:

        def apply(t: Target, name=name):
            (_result(t) / name).unlink()
            return [t.rel(_result(t))]

        yield f"remove:{name}", "scenario_files", f"Offline {name} removed", apply
    for name in t.rules["measurement_files"]:

        def apply(t: Target, name=name):
            (_result(t) / name).unlink()
            return [t.rel(_result(t))]

        yield f"remove:{name}", "measurement_files", f"Offline {name} removed", apply
    for test in t.facts.compliance_tests:
        entry = t.rules.compliance_test(test, t.facts.name)
        for name in entry.get("required_files", []):

            def apply(t: Target, test=test, name=name):
                result = t.latency_result() or _result(t)
                path = result / test / name
                if not path.is_file():
                    return None
                path.unlink()
                return [t.rel(result)]

            yield f"remove:{test}/{name}", f"compliance_tests.{test}.required_files", f"{test}/{name} removed", apply


# -- required fields ----------------------------------------------------------------------------------


def required_fields(t: Target) -> Iterator[Mutation]:
    fields = t.rules["system_description"]
    for key in fields["required"]:

        def apply(t: Target, key=key):
            edit_json(t.system_json(), lambda d: d.pop(key, None))
            return [t.rel(t.system_json())]

        yield f"system-remove:{key}", "system_description.required", f"systems/*.json without {key}", apply
    for key in fields["meaningful"]:

        def apply(t: Target, key=key):
            edit_json(t.system_json(), lambda d: d.update({key: ""}))
            return [t.rel(t.system_json())]

        yield f"system-empty:{key}", "system_description.meaningful", f"systems/*.json {key} empty", apply
    for key in fields["integer"]:

        def apply(t: Target, key=key):
            edit_json(t.system_json(), lambda d: d.update({key: "several"}))
            return [t.rel(t.system_json())]

        yield f"system-text:{key}", "system_description.integer", f'systems/*.json {key} "several"', apply
    for key in t.rules["measurements_keys"]:
        for how, change in (("remove", lambda d, k=key: d.pop(k, None)), ("empty", lambda d, k=key: d.update({k: ""}))):

            def apply(t: Target, change=change):
                edit_json(_result(t) / "measurements.json", change)
                return [t.rel(_result(t))]

            yield f"measurements-{how}:{key}", "measurements_keys", f"measurements.json {key} {how}d", apply


# -- numeric limits just past their bound -----------------------------------------------------------------


def _set(t: Target, result: Path | None, values: dict, summary: dict | None = None) -> list[str] | None:
    if result is None:
        return None
    edit_detail(result / PERF / DETAIL, values)
    edit_summary(result / PERF / SUMMARY, summary or {})
    return [t.rel(result)]


def numeric_limits(t: Target) -> Iterator[Mutation]:
    facts = t.facts.facts
    minimum = int(facts.get("min_duration_ms", t.rules.min_duration_ms))
    yield (
        "limit:min_duration",
        "min_duration_ms",
        f"Offline min_duration {minimum - 1} ms (1 under the round's)",
        lambda t: _set(
            t, _result(t), {"effective_min_duration_ms": minimum - 1}, {"min_duration (ms)": str(minimum - 1)}
        ),
    )
    needed = facts.get("checker_min_performance_sample_count", facts["performance_sample_count"])
    yield (
        "limit:performance_sample_count",
        "performance_sample_count",
        f"performance_sample_count {needed - 1}",
        lambda t: _set(
            t,
            _result(t),
            {"effective_performance_sample_count": needed - 1},
            {"performance_sample_count": str(needed - 1)},
        ),
    )
    spq = int(facts.get("offline_min_samples_per_query", 0))
    if spq:
        yield (
            "limit:offline_min_samples_per_query",
            "offline_min_samples_per_query",
            f"Offline samples_per_query {spq - 1}",
            lambda t: _set(
                t, _result(t), {"effective_samples_per_query": spq - 1}, {"samples_per_query": str(spq - 1)}
            ),
        )
    count = t.facts.accuracy_sample_count("Offline")

    def short_accuracy(t: Target):
        detail = _result(t) / "accuracy" / DETAIL
        present = [
            k
            for k in ("effective_accuracy_sample_count", "qsl_reported_total_count")
            if detail_value(detail, k) is not None
        ]
        edit_detail(detail, dict.fromkeys(present, count - 1))
        return [t.rel(_result(t))]

    yield (
        "limit:accuracy_sample_count",
        "accuracy_sample_count",
        f"the accuracy run covered {count - 1} samples",
        short_accuracy,
    )
    for scenario in ("Server", "Interactive"):
        limits = t.facts.latency_limits_ms(scenario) or {}
        for name, key, label in (
            ("ttft", "result_first_token_99.00_percentile_latency_ns", "99.00 percentile first token latency (ns)"),
            ("tpot", "result_time_per_output_token_99.00_percentile_ns", "99.00 percentile time to output token (ns)"),
        ):
            if name in limits:
                value = int(limits[name] * 1_000_000) + 1
                yield (
                    f"limit:{scenario}.{name}",
                    f"latency_ms.{scenario}.{name}",
                    f"{scenario} p99 {name.upper()} 1 ns over {limits[name]} ms",
                    lambda t, s=scenario, k=key, v=value, lb=label: _set(t, t.result(s), {k: v}, {lb: str(v)}),
                )
        if "target" in limits:
            value = int(limits["target"] * 1_000_000) + 1
            yield (
                f"limit:{scenario}.target",
                f"latency_ms.{scenario}.target",
                f"{scenario} judged against a target 1 ns looser than {limits['target']} ms",
                lambda t, s=scenario, v=value: _set(
                    t, t.result(s), {"effective_target_latency_ns": v}, {"target_latency (ns)": str(v)}
                ),
            )
    for key, seed in t.rules.seeds.items():
        yield (
            f"limit:seed.{key}",
            "loadgen.seeds",
            f"Offline {key} one off the round's",
            lambda t, k=key, v=int(seed) + 1: _set(t, _result(t), {f"effective_{k}": v}, {k: str(v)}),
        )
    regex = t.facts.accuracy.get("regex", {})
    for metric, target in t.facts.absolute_targets("Offline").items():
        if metric in regex:
            value = math.floor(target * 10_000 - 1) / 10_000
            yield (
                f"limit:accuracy.{metric}",
                "accuracy.targets",
                f"{metric} {value:.4f}, just under its target {target:.4f}",
                lambda t, m=metric, v=value: _accuracy(t, m, v),
            )
    for metric, bound in t.facts.upper_bounds("Offline").items():
        if metric in regex:
            value = math.ceil(bound * 10_000 + 1) / 10_000
            yield (
                f"limit:accuracy-upper.{metric}",
                "accuracy.upper_bound",
                f"{metric} {value:.4f}, just over its upper bound {bound:.4f}",
                lambda t, m=metric, v=value: _accuracy(t, m, v),
            )
    limit = int(t.rules["accuracy_log_max_bytes"])

    def log_over(t: Target):
        log = _result(t) / "accuracy" / "mlperf_log_accuracy.json"
        with open(log, "ab") as handle:  # trailing blanks: the same entries, one byte over the limit
            handle.write(b" " * max(1, limit + 1 - log.stat().st_size))
        return [t.rel(_result(t))]

    yield "limit:accuracy_log_max_bytes", "accuracy_log_max_bytes", f"accuracy log {limit + 1} bytes", log_over
    size = int(t.rules["tree_limits"]["max_file_bytes"])

    def big_file(t: Target):
        with open(_result(t) / PERF / "mlperf_log_trace.json", "wb") as handle:
            handle.truncate(size + 1)
        return [t.rel(_result(t))]

    yield "limit:max_file_bytes", "tree_limits.max_file_bytes", f"a file of {size + 1} bytes", big_file


def _accuracy(t: Target, metric: str, value: float) -> list[str]:
    result = _result(t)
    set_metric(result / "accuracy" / "accuracy.txt", t.facts.accuracy["regex"][metric], value, metric)
    return [t.rel(result)]


# -- one fact, two records: make them disagree ------------------------------------------------------------


def _other(printed: str) -> str:
    """A printed value that differs from ``printed`` beyond any printing precision."""
    text = printed.strip()
    flips = {"Yes": "NO", "NO": "Yes", "VALID": "INVALID", "INVALID": "VALID", "true": "false", "false": "true"}
    if text in flips:
        return flips[text]
    try:
        number = float(text)
    except ValueError:
        return text + "X"
    if re.fullmatch(r"[-+]?\d+", text):
        return str(int(text) + 1 + abs(int(text)) // 10)
    return f"{number * 1.1 + 1:.2f}"


def disagreements(t: Target, base: Path) -> Iterator[Mutation]:
    """Generated from what the base's summaries and user.conf print (read from the base)."""
    for scenario in SCENARIOS:
        folder = t.folders.get(scenario)
        if folder is None:
            continue
        source = base / "results" / t.system / t.benchmark / folder
        summary = source / PERF / SUMMARY
        if not summary.is_file():
            continue
        effective = detail_value(source / PERF / DETAIL, "effective_scenario")
        for label, printed in parse_summary(summary.read_text(errors="replace")).items():
            key = summary_key(label, effective)
            if key is None or detail_value(source / PERF / DETAIL, key) is None:
                continue

            def apply(t: Target, s=scenario, label=label, printed=printed):
                edit_summary(t.result(s) / PERF / SUMMARY, {label: _other(printed)})
                return [t.rel(t.result(s))]

            yield (
                f"disagree:{scenario}.summary.{key}",
                "summary vs detail log",
                f"{scenario} summary's {label!r} changed ({printed} -> {_other(printed)})",
                apply,
            )
        conf = source / "user.conf"
        if conf.is_file():
            lines, _ = parse_conf(conf.read_text(errors="replace"))
            model = t.facts.loadgen_model(scenario)
            for line, _value in requested_settings(lines, model, str(effective)).values():

                def apply(t: Target, s=scenario, line=line):
                    path = t.result(s) / "user.conf"
                    text = path.read_text().splitlines(keepends=True)
                    raw = text[line.line_no - 1]
                    text[line.line_no - 1] = raw.replace(f"= {line.value}", f"= {_other(line.value)}", 1)
                    path.write_text("".join(text))
                    return [t.rel(t.result(s))]

                yield (
                    f"disagree:{scenario}.user.conf.{line.key}",
                    "user.conf vs requested settings",
                    f"{scenario} user.conf {line.key} {line.value} -> {_other(line.value)}",
                    apply,
                )
    for test in t.facts.compliance_tests:
        for scenario, folder in t.folders.items():
            verify = base / "results" / t.system / t.benchmark / folder / test / "verify_performance.txt"
            if verify.is_file() and re.search(r"score\s*=", verify.read_text(errors="replace"), re.IGNORECASE):

                def apply(t: Target, s=scenario, test=test):
                    path = t.result(s) / test / "verify_performance.txt"
                    path.write_text(
                        re.sub(
                            r"(reference score\s*=\s*)(\S+)",
                            lambda m: m.group(1) + _other(m.group(2)),
                            path.read_text(),
                            flags=re.I,
                        )
                    )
                    return [t.rel(t.result(s))]

                yield (
                    f"disagree:{scenario}.{test}.score",
                    f"compliance_tests.{test}",
                    f"{test} verify file's reference score changed",
                    apply,
                )
    txt = base / "results" / t.system / t.benchmark / t.folders["Offline"] / "accuracy" / "accuracy.txt"
    if txt.is_file() and "'gen_num':" in txt.read_text(errors="replace"):

        def gen_num(t: Target):
            path = _result(t) / "accuracy" / "accuracy.txt"
            path.write_text(
                re.sub(r"('gen_num':\s*)(\d+)", lambda m: m.group(1) + str(int(m.group(2)) // 2), path.read_text())
            )
            return [t.rel(_result(t))]

        yield "disagree:accuracy.gen_num", "accuracy.txt vs accuracy run", "accuracy.txt gen_num halved", gen_num


# -- the layout: nothing ambiguous, regular files only --------------------------------------------------


def layout(t: Target) -> Iterator[Mutation]:
    table = t.rules.data.get("tree_layout") or {}

    def case_twin(t: Target):
        result = _result(t)
        twin = result.with_name(result.name.swapcase())
        shutil.copytree(result, twin)
        return [t.rel(result), t.rel(twin)]

    yield (
        "layout:case-twin",
        "tree_layout.result_folders",
        "the Offline folder again, its name's case swapped",
        case_twin,
    )

    def second_run(t: Target):
        shutil.copytree(_result(t) / PERF, _result(t) / "performance" / "run_2")
        return [t.rel(_result(t))]

    yield "layout:second-run", "tree_layout.performance_folders", "performance/run_2 beside run_1", second_run
    for name in table.get("records", []):

        def copy_record(t: Target, name=name):
            found = sorted(_result(t).rglob(name))
            if not found:
                return None
            (_result(t) / "extra").mkdir(exist_ok=True)
            shutil.copyfile(found[0], _result(t) / "extra" / name)
            return [t.rel(_result(t))]

        yield f"layout:copy:{name}", "tree_layout.records", f"a second {name} in Offline/extra/", copy_record

    def stray(t: Target):
        (t.bench_dir / "notes.txt").write_text("which result is this?\n")
        return [t.rel(t.bench_dir)]

    yield "layout:stray-file", "tree_layout (results/)", "a file in the benchmark folder", stray

    def symlink(t: Target):
        outside = t.root.parent / "outside.txt"
        outside.write_text("not the submission\n")
        (_result(t) / "accuracy" / "notes.txt").symlink_to(outside)
        return [t.rel(_result(t))]

    yield "layout:symlink", "regular files only", "a symbolic link in accuracy/ to a file outside the tree", symlink

    def hard_link(t: Target):
        readme = _result(t) / "README.md"
        (_result(t) / "README.txt").hardlink_to(readme)
        return [t.rel(_result(t))]

    yield "layout:hard-link", "regular files only", "README.md hard-linked as README.txt", hard_link

    def fifo(t: Target):
        import os

        os.mkfifo(_result(t) / "accuracy" / "pipe")
        return [t.rel(_result(t))]

    yield "layout:fifo", "regular files only", "a FIFO in accuracy/", fifo


def generate(t: Target, base: Path) -> list[Mutation]:
    return [*required_files(t), *required_fields(t), *numeric_limits(t), *disagreements(t, base), *layout(t)]
