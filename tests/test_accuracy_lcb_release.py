"""LiveCodeBench's release as published (``test.jsonl``, ``test2.jsonl``, ... of
code_generation_lite), read and joined to gpt-oss rows by question_id: folders in that layout
are built here (nothing downloaded), with private tests in the release's own
base64(zlib(pickle(JSON))) encoding."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlperf_repro.accuracy.lcb_release import join_tests, read_release, release_files
from mlperf_repro.accuracy.livecodebench import parse_tests
from mlperf_repro.errors import UserError

CODE = "livecodebench"


def encoded(tests: list[dict]) -> str:
    """Private tests as code_generation_lite stores them."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def problem(question_id: str, *, call: bool = False, private: int = 2) -> dict:
    kind = "functional" if call else "stdin"
    public = [{"input": "1 2\n" if not call else "1\n2", "output": "3\n" if not call else "3", "testtype": kind}]
    # call-based: one JSON value per input line; stdin: the program's whole input and output
    hidden = [
        {"input": f"{i}\n1", "output": str(i + 1), "testtype": kind}
        if call
        else {"input": f"{i} 1\n", "output": f"{i + 1}\n", "testtype": kind}
        for i in range(private)
    ]
    return {
        "question_title": f"problem {question_id}",
        "question_content": "Add two numbers.",
        "platform": "leetcode" if call else "atcoder",
        "question_id": question_id,
        "contest_id": "c1",
        "contest_date": "2025-01-01T00:00:00",
        "starter_code": "class Solution:\n    def add(self, a, b):\n" if call else "",
        "difficulty": "easy",
        "public_test_cases": json.dumps(public),
        "private_test_cases": encoded(hidden),
        "metadata": json.dumps({"func_name": "add"} if call else {}),
    }


def write_release(folder: Path, per_file: list[list[dict]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for number, problems in enumerate(per_file, 1):
        name = "test.jsonl" if number == 1 else f"test{number}.jsonl"
        (folder / name).write_text("".join(json.dumps(p) + "\n" for p in problems))
    return folder


def six_files(tmp_path: Path) -> Path:
    return write_release(
        tmp_path / "code_generation_lite",
        [[problem(f"q{n}a"), problem(f"q{n}b", call=True)] for n in range(1, 7)],
    )


def test_release_files_follow_the_published_names():
    assert release_files("release_v1") == ("test.jsonl",)
    assert release_files("release_v6")[-1] == "test6.jsonl" and len(release_files("release_v6")) == 6
    for bad in ("release_v0", "release_v7", "v6", "release_vx", ""):
        with pytest.raises(UserError, match="unknown LiveCodeBench release"):
            release_files(bad)


def test_a_published_release_joins_to_the_rows_and_its_tests_parse(tmp_path):
    release = read_release(six_files(tmp_path))
    assert len(release) == 12
    families = ["gpqa", CODE, CODE, "aime"]
    ids = ["", "q6b", "q1a", ""]  # the non-code rows' ids are never looked up
    joined = join_tests(families, ids, release, code_family=CODE, table="acc.parquet", release_name="v6")
    assert joined[0] is None and joined[3] is None
    call_suite = parse_tests(joined[1], "row 1")
    stdin_suite = parse_tests(joined[2], "row 2")
    # public then private tests, in order; the call-based item keeps its function's name
    assert call_suite.fn_name == "add" and len(call_suite.inputs) == 3
    assert stdin_suite.fn_name is None and stdin_suite.inputs == ["1 2\n", "0 1\n", "1 1\n"]


def test_an_older_release_reads_only_its_files(tmp_path):
    release = read_release(six_files(tmp_path), "release_v3")
    assert sorted(release) == sorted(f"q{n}{s}" for n in (1, 2, 3) for s in "ab")


def test_missing_question_ids_are_named_and_counted(tmp_path):
    release = read_release(six_files(tmp_path))
    ids = [f"gone{i}" for i in range(13)]
    with pytest.raises(UserError) as err:
        join_tests([CODE] * 14, ["q1a", *ids], release, code_family=CODE, table="acc.parquet", release_name="v6")
    message = str(err.value)
    assert message.startswith("acc.parquet: 13 LiveCodeBench row(s)") and "gone0" in message and "gone9" in message
    assert "gone10" not in message and "and 3 more" in message


def test_an_empty_ground_truth_is_no_error_and_gets_no_tests(tmp_path):
    release = read_release(six_files(tmp_path))
    assert join_tests([CODE, CODE], ["", ""], release, code_family=CODE, table="t", release_name="v6") == [None, None]


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda folder: (folder / "test4.jsonl").unlink(), "test4.jsonl: missing"),
        (lambda folder: (folder / "test2.jsonl").write_text("{not json\n"), "test2.jsonl:1: not a JSON object"),
        (lambda folder: (folder / "test2.jsonl").write_text("[1, 2]\n"), "not a JSON object but list"),
        (lambda folder: (folder / "test3.jsonl").write_text('{"public_test_cases": "[]"}\n'), "no question_id"),
        (lambda folder: (folder / "test5.jsonl").write_bytes(b"\xff\xfe\n"), "cannot be read as UTF-8"),
        (
            lambda folder: (folder / "test6.jsonl").write_text(json.dumps({"question_id": "q9"}) + "\n"),
            "question_id q9\\): lacks public_test_cases, private_test_cases",
        ),
        (
            lambda folder: (folder / "test6.jsonl").write_text(json.dumps(problem("q1a", private=5)) + "\n"),
            "question_id q1a again, with other tests than .*test.jsonl:1",
        ),
    ],
)
def test_a_damaged_release_is_one_clear_error_naming_the_file(tmp_path, damage, expected):
    folder = six_files(tmp_path)
    damage(folder)
    with pytest.raises(UserError, match=expected):
        read_release(folder)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_line_reads_or_is_a_clear_error(tmp_path_factory, line):
    folder = tmp_path_factory.mktemp("release")
    write_release(folder, [[problem("q1")]])
    with (folder / "test.jsonl").open("ab") as handle:
        handle.write(line.replace(b"\n", b" ") + b"\n")
    try:
        release = read_release(folder, "release_v1")
    except UserError as err:
        assert "test.jsonl" in str(err)
    else:
        assert "q1" in release


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(st.sampled_from([CODE, "gpqa", "aime"]), st.text(max_size=6)), max_size=20),
    known=st.sets(st.text(min_size=1, max_size=6), max_size=10),
)
def test_join_gives_every_code_row_its_problem_or_names_it(rows, known):
    release = {key: {"public_test_cases": key, "private_test_cases": "", "metadata": "{}"} for key in known}
    keys = [key if family == CODE else "" for family, key in rows]
    missing = [key for key in keys if key and key not in release]
    try:
        joined = join_tests(
            [f for f, _ in rows], [k for _, k in rows], release, code_family=CODE, table="t", release_name="r"
        )
    except UserError as err:
        assert missing and str(err).startswith(f"t: {len(missing)} LiveCodeBench row(s)")
        return
    assert not missing and len(joined) == len(rows)
    for key, cell in zip(keys, joined):
        assert (cell is None) if not key else cell["public_test_cases"] == key
