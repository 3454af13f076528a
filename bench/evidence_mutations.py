"""Mutations generated from the checker's evidence map, planted in real published trees.

    .venv/bin/python bench/evidence_mutations.py SUBMITTER_DIR [SUBMITTER_DIR ...]
        [--round v6.0] [--inference CHECKOUT] [--per-kind N] [--json OUT]

SUBMITTER_DIR is a published submitter folder (…/closed/AMD). For every record kind of the map
(``mlperf_repro.check.evidence``) that this script can edit (LoadGen detail logs and summaries,
the compliance verify files, measurements and system JSON, accuracy.txt, a power result's session
files and samples, MLC's cpu_info.json and console, the reference harness's results.json), up to N files of the
kind are taken from the tree, one per scenario where it can, and every field of the map present
in each file is perturbed the ways a careless or dishonest submitter would: the value moved up
and down (a number), flipped (a boolean or a verdict), edited (text), removed, written twice with
another value (detail logs), and the whole file taken from the same place in another result
folder. Each mutation is applied alone to a copy of the tree.

A mutation is "caught" by ours when an error names the file or its result folder, and by the
official checker (with --inference) when it stops saying "submission looks OK". A mutation of a
field the map marks derived or cross-checked (as an error) must be caught; one of a field marked
trusted, or checked as a warning, is counted as undetectable with the map's reason. Prints the
table per record kind and every mapped mutation that was missed.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from official_checker import run_official  # noqa: E402  (bench/, the script's folder)

from mlperf_repro.benchmarks import load_round  # noqa: E402
from mlperf_repro.check import evidence  # noqa: E402
from mlperf_repro.check.rules.verdicts import VERIFY_FILES  # noqa: E402
from mlperf_repro.check.tree import check_tree  # noqa: E402
from mlperf_repro.loadgen_logs import MLLOG_PREFIX  # noqa: E402

Edit = Callable[[bytes], bytes | None]


@dataclass(frozen=True)
class Mutation:
    record: str
    field: str
    how: str  # changed up, changed down, flipped, edited, removed, written twice, from another folder
    path: str  # relative to the view's root
    edit: Edit


# -- values ------------------------------------------------------------------------------------------


def _moved(value) -> list[tuple[str, object]]:
    if isinstance(value, bool):
        return [("flipped", not value)]
    if isinstance(value, int):
        return [("changed up", value * 3 + 7), ("changed down", value // 3 if value > 2 else value - 5)]
    if isinstance(value, float):
        return [("changed up", value * 3 + 0.7), ("changed down", value / 3)]
    if isinstance(value, str):
        # (a count written as text, as MLC's cpu_info.json writes them: another count too)
        counts = [(how, str(moved)) for how, moved in _moved(int(value))] if re.fullmatch(r"\d+", value) else []
        return [*counts, ("edited", f"{value} edited")]
    return []


def _moved_text(printed: str) -> list[tuple[str, str]]:
    lowered = printed.strip().lower()
    if lowered in ("true", "false", "yes", "no", "skipped"):
        return [("flipped", {"true": "False", "false": "True", "yes": "NO", "no": "Yes", "skipped": "False"}[lowered])]
    if lowered in ("test pass", "test fail"):
        return [("flipped", "TEST FAIL" if lowered == "test pass" else "TEST PASS")]
    try:
        number = float(printed)
    except ValueError:
        return [("edited", printed + " edited")] if printed.strip() else []
    if re.fullmatch(r"[-+]?\d+", printed.strip()):
        whole = int(printed)
        return [("changed up", str(whole * 3 + 7)), ("changed down", str(whole // 3 if whole > 2 else whole - 5))]
    return [("changed up", f"{number * 3 + 0.7:.6g}"), ("changed down", f"{number / 3:.6g}")]


# -- record formats ----------------------------------------------------------------------------------


def _mllog(data: bytes) -> list[tuple[int, dict]]:
    out = []
    for i, line in enumerate(data.decode("utf-8", "replace").split("\n")):
        if line.startswith(MLLOG_PREFIX):
            try:
                record = json.loads(line[len(MLLOG_PREFIX) :])
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                out.append((i, record))
    return out


def _mllog_mutations(record_kind: str, path: str, data: bytes) -> Iterator[tuple[str, str, Edit]]:
    seen = set()
    for index, record in _mllog(data):
        key = record["key"]
        if key in seen:
            continue
        seen.add(key)

        def rewrite(raw: bytes, index=index, value=None, drop=False, twice=False) -> bytes:
            lines = raw.decode("utf-8", "replace").split("\n")
            record = json.loads(lines[index][len(MLLOG_PREFIX) :])
            if drop:
                del lines[index]
            else:
                record["value"] = value
                new = MLLOG_PREFIX + " " + json.dumps(record)
                if twice:
                    lines.insert(index + 1, new)
                else:
                    lines[index] = new
            return "\n".join(lines).encode()

        for how, value in _moved(record.get("value")):
            yield key, how, lambda raw, v=value, i=index: rewrite(raw, i, v)
        yield key, "removed", lambda raw, i=index: rewrite(raw, i, drop=True)
        for _how, value in _moved(record.get("value"))[:1]:
            yield key, "written twice", lambda raw, v=value, i=index: rewrite(raw, i, v, twice=True)


_SUMMARY_LINE = re.compile(r"^(\s*)([^:\n]+?)(\s*:\s*)(\S.*?)\s*$", re.MULTILINE)


def _text_mutations(name: str, match: re.Match, group: int) -> Iterator[tuple[str, str, Edit]]:
    """A text record's field (``group`` of ``match``) moved, and its line removed."""

    def splice(raw: bytes, start: int, end: int, value: str = "") -> bytes:
        text = raw.decode("utf-8", "replace")
        return (text[:start] + value + text[end:]).encode()

    start, end = match.span(group)
    for how, value in _moved_text(match.group(group)):
        yield name, how, lambda raw, s=start, e=end, v=value: splice(raw, s, e, v)
    line_start, line_end = match.span(0)
    yield name, "removed", lambda raw, s=line_start, e=line_end: splice(raw, s, e)


def _summary_mutations(record_kind: str, path: str, data: bytes) -> Iterator[tuple[str, str, Edit]]:
    seen = set()
    for match in _SUMMARY_LINE.finditer(data.decode("utf-8", "replace")):
        label = match.group(2).strip()
        if label not in seen:
            seen.add(label)
            yield from _text_mutations(label, match, 4)


def _pattern_mutations(patterns: dict[str, re.Pattern]) -> Callable[[str, str, bytes], Iterator[tuple[str, str, Edit]]]:
    def mutations(record_kind: str, path: str, data: bytes) -> Iterator[tuple[str, str, Edit]]:
        text = data.decode("utf-8", "replace")
        for field, pattern in patterns.items():
            match = pattern.search(text)
            if match:
                yield from _text_mutations(field, match, 1)

    return mutations


def _json_mutations(record_kind: str, path: str, data: bytes) -> Iterator[tuple[str, str, Edit]]:
    try:
        loaded = json.loads(data)
    except ValueError:
        return
    if not isinstance(loaded, dict):
        return
    for key, value in loaded.items():

        def rewrite(raw: bytes, key=key, value=None, drop=False) -> bytes:
            obj = json.loads(raw)
            if drop:
                obj.pop(key, None)
            else:
                obj[key] = value
            return json.dumps(obj, indent=2).encode()

        for how, moved in _moved(value):
            yield key, how, lambda raw, k=key, v=moved: rewrite(raw, k, v)
        yield key, "removed", lambda raw, k=key: rewrite(raw, k, drop=True)


_ACCURACY_TXT = {
    "gen_num": re.compile(r"'gen_num':\s*'?([\d.]+)"),
    "gen_tok_len": re.compile(r"'gen_tok_len':\s*'?([\d.]+)"),
    "tokens_per_sample": re.compile(r"'tokens_per_sample':\s*'?([\d.]+)"),
    "hash": re.compile(r"^hash=([\w\d]+)$", re.MULTILINE),
}

# A power session's samples (the first of each phase file) and the daemon's tally; MLC's console.
_SPL = {
    "Time": re.compile(r"^Time,([^,\n]+),", re.MULTILINE),
    "Watts": re.compile(r"^Time,[^,\n]+,Watts,([-\d.]+)", re.MULTILINE),
    "Mark": re.compile(r",Mark,([^,\n]+)"),
}
_PTD_LOG = {
    "Avg watts": re.compile(r"Avg watts ([-\d.]+)"),
    "samples": re.compile(r", samples (\d+)"),
    "Go with mark": re.compile(r"Go with mark '([^']+)'"),
}
_CONSOLE = {"Result": re.compile(r"Result: \w+: ([-+\d.eE]+)")}

# record kind -> (files, relative to a result folder, to take instances from; the mutations of one)
EDITORS = {
    "power/client.json": (["performance/power/client.json"], _json_mutations),
    "power/server.json": (["performance/power/server.json"], _json_mutations),
    "spl.txt": (["performance/run_1/spl.txt", "performance/ranging/spl.txt"], _pattern_mutations(_SPL)),
    "power/ptd_logs.txt": (["performance/power/ptd_logs.txt"], _pattern_mutations(_PTD_LOG)),
    "cpu_info.json": (["cpu_info.json"], _json_mutations),
    "performance_console.out": (["performance_console.out"], _pattern_mutations(_CONSOLE)),
    "results.json": (["accuracy/results.json"], _json_mutations),
    "mlperf_log_detail.txt": (
        ["performance/run_1/mlperf_log_detail.txt", "accuracy/mlperf_log_detail.txt"],
        _mllog_mutations,
    ),
    "mlperf_log_summary.txt": (["performance/run_1/mlperf_log_summary.txt"], _summary_mutations),
    "measurements.json": (["measurements.json"], _json_mutations),
    "accuracy.txt": (["accuracy/accuracy.txt"], _pattern_mutations(_ACCURACY_TXT)),
    **{spec.kind: ([f"{spec.test}/{spec.name}"], _pattern_mutations(spec.fields)) for spec in VERIFY_FILES.values()},
}


def expected(record: str, field: str) -> tuple[str, str]:
    """("caught" or "undetectable", why) for a field, from the map."""
    entries = evidence.entries_for(record, field)
    errors = [e for e in entries if e.how != evidence.TRUSTED and e.severity == "error"]
    if errors:
        return "caught", f"{errors[0].how} by {errors[0].rule}: {errors[0].basis}"
    if entries:
        return (
            "undetectable",
            f"{entries[0].how}{' (warning)' if entries[0].severity == 'warning' else ''}: {entries[0].basis}",
        )
    return "undetectable", "not in the map: no rule reads it"


# -- planting ------------------------------------------------------------------------------------------


def result_folders(base: Path) -> list[Path]:
    return sorted(p for p in (base / "results").glob("*/*/*") if p.is_dir())


def instances(base: Path, per_kind: int) -> dict[str, list[Path]]:
    """Files of each editable kind: at most per_kind, of as many scenarios as there are."""
    found: dict[str, list[Path]] = {}
    for kind, (relatives, _) in EDITORS.items():
        chosen, scenarios = [], set()
        for folder in result_folders(base):
            for relative in relatives:
                path = folder / relative
                if path.is_file() and not path.is_symlink() and folder.name.lower() not in scenarios:
                    chosen.append(path)
                    scenarios.add(folder.name.lower())
            if len(chosen) >= per_kind:
                break
        found[kind] = chosen
    return found


def _other_folder(base: Path, path: Path) -> Path | None:
    """The same file in another result folder (the other scenario of the benchmark first)."""
    scenario = path
    while scenario.parent.parent.parent.parent != base:
        scenario = scenario.parent
    relative = path.relative_to(scenario)
    for folder in result_folders(base):
        other = folder / relative
        if folder != scenario and other.is_file() and other.read_bytes() != path.read_bytes():
            return other
    return None


def mutations_of(base: Path, view_base: Path, per_kind: int) -> Iterator[Mutation]:
    root = view_base.parent.parent
    for kind, paths in instances(base, per_kind).items():
        mutate = EDITORS[kind][1]
        for original in paths:
            target = view_base / original.relative_to(base)
            rel = target.relative_to(root).as_posix()
            data = original.read_bytes()
            for field, how, edit in mutate(kind, rel, data):
                yield Mutation(kind, field, how, rel, edit)
            other = _other_folder(base, original)
            if other is not None:
                copied = other.read_bytes()
                yield Mutation(kind, "<the whole file>", "from another folder", rel, lambda raw, c=copied: c)


def caught_by_ours(root: Path, rules, path: str | None) -> list[str]:
    """Our errors naming ``path`` or its result folder (every error where path is None)."""
    prefix = "/".join(path.split("/")[:6]) if path else ""  # division/submitter/results/system/benchmark/scenario
    return [
        f.line()
        for f in check_tree(root, rules)
        if f.severity == "error"
        and (path is None or f.path == path or f.path == prefix or f.path.startswith(prefix + "/"))
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submitters", type=Path, nargs="+")
    parser.add_argument("--round", default="v6.0")
    parser.add_argument("--inference", type=Path, help="a checkout of mlcommons/inference (runs the official checker)")
    parser.add_argument("--per-kind", type=int, default=3, help="files of each record kind per submitter")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rules = load_round(args.round)
    rows: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    missed, undetectable, report = [], defaultdict(set), []
    for base in args.submitters:
        base = base.resolve()
        division, submitter = base.parent.name, base.name
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch) / "view"
            view_base = root / division / submitter
            shutil.copytree(base, view_base, symlinks=True)
            baseline = set(caught_by_ours(root, rules, None))
            start = time.perf_counter()
            count = 0
            for mutation in mutations_of(base, view_base, args.per_kind):
                target = root / mutation.path
                before = target.read_bytes()
                after = mutation.edit(before)
                if after is None or after == before:
                    continue
                target.write_bytes(after)
                try:
                    ours = [line for line in caught_by_ours(root, rules, mutation.path) if line not in baseline]
                    official = None
                    if args.inference:
                        official = not run_official(args.inference, root, args.round, submitter).ok
                finally:
                    target.write_bytes(before)
                count += 1
                want, why = expected(mutation.record, mutation.field)
                key = (submitter, mutation.record)
                rows[key]["mutations"] += 1
                rows[key]["ours"] += bool(ours)
                rows[key]["official"] += bool(official)
                if want == "undetectable":
                    rows[key]["undetectable"] += 1
                    undetectable[mutation.record].add(f"`{mutation.field}`: {why}")
                elif not ours:
                    rows[key]["missed"] += 1
                    missed.append(f"{mutation.path}: {mutation.field} {mutation.how} ({why})")
                report.append(
                    {
                        "submitter": submitter,
                        "record": mutation.record,
                        "field": mutation.field,
                        "how": mutation.how,
                        "path": mutation.path,
                        "expected": want,
                        "ours": ours[:2],
                        "official": official,
                    }
                )
            print(
                f"# {division}/{submitter}: {count} mutations in {time.perf_counter() - start:.0f} s", file=sys.stderr
            )
    print(
        "| submitter | record kind | mutations | caught by ours | caught by the official checker "
        "| undetectable (map: trusted or warning) | mapped, missed |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for (submitter, record), row in sorted(rows.items()):
        official = row["official"] if args.inference else "not run"
        counts = f"{row['mutations']} | {row['ours']} | {official} | {row['undetectable']} | {row['missed']}"
        print(f"| {submitter} | `{record}` | {counts} |")
    print("\nUndetectable, by the map's reason:")
    for record, reasons in sorted(undetectable.items()):
        for reason in sorted(reasons):
            print(f"- `{record}` {reason}")
    print(f"\nMapped mutations missed: {len(missed)}")
    for line in missed:
        print(f"- {line}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
