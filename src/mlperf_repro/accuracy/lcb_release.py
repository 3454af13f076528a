"""LiveCodeBench's code-generation release as published, joined to gpt-oss accuracy rows.

The round's accuracy parquet names a LiveCodeBench item only by its ``question_id`` (the
row's ``ground_truth``); the reference evaluator looks the item's tests up in the LiveCodeBench
release it pins. That release (``code_generation_lite``) is a folder of JSON-lines files, each
release adding one: ``release_v1`` is ``test.jsonl``, ``release_vN`` the first N of
``test.jsonl, test2.jsonl, ...``. Each line is one problem, with ``question_id`` and the
three columns the tests are read from (:func:`.livecodebench.parse_tests`):
``public_test_cases``, ``private_test_cases`` and ``metadata``.

:func:`read_release` reads a release folder into question_id -> those columns, and
:func:`join_tests` gives each LiveCodeBench row of a gpt-oss table its tests, naming every
question_id the release lacks. Nothing here downloads: the folder is an acquired artifact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError

__all__ = ["TEST_COLUMNS", "join_tests", "read_release", "release_files"]

#: The columns of a release's problem a row's tests are read from.
TEST_COLUMNS = ("public_test_cases", "private_test_cases", "metadata")
_NEWEST = 6
#: How many missing question_ids an error lists before it counts the rest.
_LISTED = 10


def release_files(version: str) -> tuple[str, ...]:
    """The files of ``release_vN`` (N from 1 to the newest this knows)."""
    number = version.removeprefix("release_v")
    if not number.isdigit() or not 1 <= int(number) <= _NEWEST:
        raise UserError(
            f"unknown LiveCodeBench release {version!r}: expected release_v1 to release_v{_NEWEST} "
            "(the reference pins release_v6)"
        )
    return tuple("test.jsonl" if n == 1 else f"test{n}.jsonl" for n in range(1, int(number) + 1))


def read_release(folder: str | os.PathLike[str], version: str = f"release_v{_NEWEST}") -> dict[str, dict[str, Any]]:
    """question_id -> the problem's test columns, from the release's files in ``folder``.

    A missing file, a line that is not a JSON object, a problem without a question_id or
    test columns, or a question_id that two problems give differently is a UserError naming
    the file and line."""
    folder = Path(folder)
    problems: dict[str, dict[str, Any]] = {}
    where_of: dict[str, str] = {}
    for name in release_files(version):
        path = folder / name
        if not path.is_file():
            raise UserError(
                f"{path}: missing; LiveCodeBench {version} is the files {', '.join(release_files(version))} "
                "of code_generation_lite in one folder"
            )
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                problem = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise UserError(f"{where}: not a JSON object ({exc})") from None
            if not isinstance(problem, dict):
                raise UserError(f"{where}: not a JSON object but {type(problem).__name__}")
            question_id = problem.get("question_id")
            if not isinstance(question_id, (str, int)) or isinstance(question_id, bool) or str(question_id) == "":
                raise UserError(f"{where}: no question_id")
            missing = [c for c in TEST_COLUMNS[:2] if c not in problem]
            if missing:
                raise UserError(f"{where} (question_id {question_id}): lacks {', '.join(missing)}")
            tests = {c: problem.get(c) for c in TEST_COLUMNS}
            key = str(question_id)
            if key in problems and problems[key] != tests:
                raise UserError(f"{where}: question_id {key} again, with other tests than {where_of[key]}")
            problems[key], where_of[key] = tests, where
    return problems


def join_tests(
    families: Sequence[str],
    question_ids: Sequence[str],
    release: Mapping[str, Mapping[str, Any]],
    *,
    code_family: str,
    table: str,
    release_name: str,
) -> list[dict[str, Any] | None]:
    """Per row, the release's test columns of its question_id (the row's ``ground_truth`` as
    its evaluator reads it, "" where it has none) where the row's family is ``code_family``,
    else None. Every code row's id must be in the release: the error names the missing ones
    (``table`` and ``release_name`` say where to look)."""
    joined: list[dict[str, Any] | None] = []
    missing: list[str] = []
    for family, key in zip(families, question_ids, strict=True):
        if family != code_family or not key:
            # Not code, or no id: scored incorrect, as the reference scores an empty ground truth.
            joined.append(None)
            continue
        problem = release.get(key)
        if problem is None:
            missing.append(key)
        joined.append(None if problem is None else dict(problem))
    if missing:
        listed = ", ".join(missing[:_LISTED]) + (
            f" and {len(missing) - _LISTED} more" if len(missing) > _LISTED else ""
        )
        raise UserError(
            f"{table}: {len(missing)} LiveCodeBench row(s) name a question_id that {release_name} does not have: "
            f"{listed}; use the LiveCodeBench release the round pins"
        )
    return joined
