"""power-evidence: a power result's samples and session files against the run they measured.

Each test writes a whole power session beside a full-scale factory result (power_session.py),
changes one thing, and expects the rule to name it; the untouched session passes."""

from __future__ import annotations

import datetime
import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from power_session import SESSION, add_power_session, sample_line, write_session
from tree_factory import BENCH, SUBMITTER, SYSTEM, build_tree, make_runs
from tree_factory import RULES as ROUND

from mlperf_repro.check import evidence
from mlperf_repro.check.rules.power import parse_ptd_log, parse_spl
from mlperf_repro.check.tree import check_tree

RESULT = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}/Offline"


@pytest.fixture(scope="session")
def power_tree(tmp_path_factory):
    root = build_tree(tmp_path_factory.mktemp("power") / "tree", make_runs(tmp_path_factory.mktemp("runs")))
    add_power_session(root / RESULT)
    return root


@pytest.fixture
def tree(power_tree, tmp_path):
    copy = tmp_path / "tree"
    shutil.copytree(power_tree, copy)
    return copy


def perf(tree: Path) -> Path:
    return tree / RESULT / "performance"


def power_errors(tree: Path) -> list[str]:
    return [f.line() for f in check_tree(tree, ROUND) if f.rule == "power-evidence" and f.severity == "error"]


def edit_spl(tree: Path, run: str, change, *, resign: bool = True) -> None:
    path = perf(tree) / run / "spl.txt"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(change(lines)) + "\n")
    if resign:  # a careful forger rewrites the session's checksums too
        write_session(perf(tree))


def test_a_whole_power_session_passes(tree):
    findings = [f for f in check_tree(tree, ROUND) if f.severity == "error"]
    assert findings == [], [f.line() for f in findings]


def test_every_field_read_has_an_entry_in_the_map(tree):
    with evidence.reading() as reads:
        check_tree(tree, ROUND)
    power_reads = {
        r for r in reads if r[0] in ("spl.txt", "power/ptd_logs.txt", "power/client.json", "power/server.json")
    }
    assert power_reads, "the power records were not read"
    assert evidence.unmapped(reads) == []


def _drop_window_end(lines):
    return lines[: len(lines) // 2]


def _drop_middle(lines):
    return lines[:10] + lines[16:]


def _scale(lines, factor=0.9):
    out = []
    for line in lines:
        fields = line.split(",")
        for i, token in enumerate(fields):
            if token == "Watts":
                fields[i + 1] = f"{float(fields[i + 1]) * factor:.6f}"
        out.append(",".join(fields))
    return out


def _total_only(lines, factor=0.9):
    out = []
    for line in lines:
        fields = line.split(",")
        fields[3] = f"{float(fields[3]) * factor:.6f}"
        out.append(",".join(fields))
    return out


def _other_mark(lines):
    return [line.replace(f"{SESSION}_testing", "2025-12-01_09-00-00_testing") for line in lines]


def _reordered(lines):
    return [lines[1], lines[0], *lines[2:]]


def _garbage(lines):
    return [*lines[:5], "Time,not a time,Watts,1", *lines[5:]]


@pytest.mark.parametrize(
    "change, said",
    [
        (_drop_window_end, "part of the run was not measured"),
        (_drop_middle, "no sample between lines"),
        (_scale, "but the daemon's log"),
        (_total_only, "add up to"),
        (_other_mark, "not this phase's"),
        (_reordered, "is older than"),
        (_garbage, "is not a sample"),
    ],
    ids=["cut-short", "gap", "scaled", "total-not-channels", "other-session", "out-of-order", "not-a-sample"],
)
def test_samples_that_do_not_measure_the_run(tree, change, said):
    edit_spl(tree, "run_1", change)
    found = power_errors(tree)
    assert any(said in line for line in found), found


def test_samples_scaled_with_their_daemon_log_still_fail_on_volts_and_amps(tree):
    """A forger who scales the watts in spl.txt and in the daemon's log alike (and its tally):
    each channel's watts are then no longer its volts x amps x power factor."""
    edit_spl(tree, "run_1", _scale, resign=False)
    log = perf(tree) / "power" / "ptd_logs.txt"
    text = log.read_text()
    spl = {
        line.split(",")[1]: line.split(",")[3] for line in (perf(tree) / "run_1" / "spl.txt").read_text().splitlines()
    }
    text = re.sub(
        r"^Time,([^,]+),Watts,([-\d.]+)",
        lambda m: f"Time,{m.group(1)},Watts,{spl.get(m.group(1), m.group(2))}",
        text,
        flags=re.MULTILINE,
    )
    log.write_text(text)
    write_session(perf(tree))
    found = power_errors(tree)
    assert any("volts x amps x power factor" in line for line in found), found


def test_a_file_changed_after_the_session_wrote_it(tree):
    edit_spl(tree, "run_1", _drop_window_end, resign=False)
    found = power_errors(tree)
    assert any("the file was changed after the session wrote it" in line for line in found), found


@pytest.mark.parametrize("name", ["power/ptd_logs.txt", "power/client.log", "ranging/spl.txt"])
def test_a_session_file_removed(tree, name):
    (perf(tree) / name).unlink()
    found = power_errors(tree)
    assert any(f"{name} is missing" in line for line in found), found


@pytest.mark.parametrize("which", ["client.json", "server.json"])
def test_a_session_file_unreadable(tree, which):
    (perf(tree) / "power" / which).write_text("{not json")
    found = power_errors(tree)
    assert any(f"power/{which} is not readable JSON" in line for line in found), found


def _rewrite(tree: Path, which: str, change) -> None:
    path = perf(tree) / "power" / which
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "which, change, said",
    [
        ("server.json", lambda d: d.update(session_name="2025-12-01_09-00-00"), "names session"),
        ("server.json", lambda d: d["uuid"].update(client="00000000-0000-0000-0000-000000000009"), "different uuids"),
        ("client.json", lambda d: d["phases"].pop("testing"), "has no testing phase"),
        ("client.json", lambda d: d["phases"].update(testing=d["phases"]["ranging"]), "is not inside"),
        (
            "server.json",
            lambda d: d["phases"].update(testing=[[t + 5.0, m] for t, m in d["phases"]["testing"]]),
            "apart",
        ),
        ("client.json", lambda d: d["results"].update({"run_1/spl.txt": "0" * 40}), "different checksums"),
        ("server.json", lambda d: d["results"].pop("run_1/spl.txt"), "has no checksum"),
        ("client.json", lambda d: d.pop("results"), "has no 'results'"),
        ("server.json", lambda d: d["phases"].pop("testing"), "server.json has no testing phase"),
        ("server.json", lambda d: d["messages"].pop(), "records 3 commands"),
        ("server.json", lambda d: d["messages"][2].update(reply="OK other"), "message 3 differs"),
        ("client.json", lambda d: d["messages"][1].update(reply="1.0"), None),  # each host's own clock
        (
            "server.json",
            lambda d: d["messages"][0].update(reply="mlcommons/power server v4"),
            "protocol v3, the server v4",
        ),
        ("server.json", lambda d: d["sources"].update({"client.py": "0" * 40}), "hash differently"),
        ("server.json", lambda d: d.update(debug=True), "debug mode"),
        ("client.json", lambda d: d.pop("messages"), "has no messages"),
        ("server.json", lambda d: d.pop("sources"), "has no sources"),
    ],
    ids=[
        "session-name",
        "uuid",
        "no-phase",
        "other-phase",
        "clocks-apart",
        "checksums-differ",
        "unlisted",
        "no-results",
        "server-no-phase",
        "message-missing",
        "reply-differs",
        "time-reply-differs",
        "protocol",
        "sources",
        "debug",
        "no-messages",
        "no-sources",
    ],
)
def test_session_files_that_disagree(tree, which, change, said):
    _rewrite(tree, which, change)
    found = power_errors(tree)
    if said is None:
        assert found == [], found
    else:
        assert any(said in line for line in found), found


def test_a_tally_the_samples_do_not_give(tree):
    log = perf(tree) / "power" / "ptd_logs.txt"
    text = log.read_text()
    marker = text.index(f"Go with mark '{SESSION}_testing'")
    head, tail = text[:marker], text[marker:]
    tail = re.sub(r"Avg watts ([\d.]+)", lambda m: f"Avg watts {float(m.group(1)) * 0.9:.6f}", tail, count=1)
    log.write_text(head + tail)
    write_session(perf(tree))
    found = power_errors(tree)
    assert any("but the daemon's tally says" in line for line in found), found


def test_a_result_run_drawing_far_less_than_ranging(tmp_path_factory):
    root = build_tree(tmp_path_factory.mktemp("low") / "tree", make_runs(tmp_path_factory.mktemp("runs")))
    add_power_session(root / RESULT, watts_each=700.0, ranging_watts_each=800.0)
    found = power_errors(root)
    assert any("below the ranging run's" in line for line in found), found


# -- the parsers over any input ------------------------------------------------------------------

LINE_PIECES = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
    st.sampled_from(["Time", "Watts", "Volts", "Amps", "PF", "Mark", "Ch1", "Ch2", "nan", "-1", "1e309", ""]),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(LINE_PIECES, max_size=30).map(",".join), max_size=20))
def test_any_spl_text_is_read_or_reported_never_a_fault(lines):
    samples, problems = parse_spl(lines)
    assert len(samples) + len(problems) <= len(lines)
    for sample in samples:
        assert isinstance(sample.watts, float)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2099, 1, 1)),
            st.floats(min_value=0.1, max_value=5000, allow_nan=False),
            st.booleans(),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_generated_samples_read_back_as_written(rows):
    lines = [sample_line(when, watts, "s_testing", channels=channels) for when, watts, channels in rows]
    samples, problems = parse_spl(lines)
    assert problems == [] and len(samples) == len(rows)
    for sample, line in zip(samples, lines):
        assert sample.watts == float(line.split(",")[3])
        assert sample.mark == "s_testing"
        assert len(sample.channels) == (3 if "Ch1" in line else 0)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.text(alphabet="0123456789.-", max_size=12))
def test_any_daemon_log_is_read_never_a_fault(text, number):
    tally = f"Avg watts {number}, min watts 1, max watts 2, samples 3, errors 0, valid 3"
    tallies, _ = parse_ptd_log(f"{text}\nGo with mark 'x'\n{tally}\n{text}")
    assert set(tallies) <= {"x"} | set(re.findall(r"Go with mark '([^']*)'", text))
