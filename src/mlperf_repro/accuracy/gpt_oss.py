"""The gpt-oss-120b accuracy evaluation (reference ``eval_mlperf_accuracy.py``): exact match.

What the reference does, and so what this does:

* Every entry of ``mlperf_log_accuracy.json`` is scored (no de-duplication by qsl_idx),
  its int32 token ids decoded with ``skip_special_tokens=False`` (the harmony channel
  markers stay in the text).
* The row ``qsl_idx`` of the dataset gives ``dataset`` (the family: the first key of the
  table's ``families`` that the lower-cased name contains) and ``ground_truth``.
* GPQA / MMLU(-Pro): the answer letter is read from the ``final`` channel (a letter at its
  start, else ``Answer: X`` in it, else the last ``ANSWER``/``FINAL ANSWER`` in the whole
  text) and compared case-insensitively with the ground truth.
* AIME: the last ``\\boxed{N}`` in the whole text, else the last ``Answer: N``, an
  integer 0-999, compared with ``int(ground_truth)``.
* exact_match = 100 x sum over families of correct / repeats, divided by the same sum of
  samples / repeats (the table's ``dataset_repeats``, 1 where absent), printed with 3
  decimals as ``'exact_match': 83.130``.

* LiveCodeBench: the program in the output (the last ```` ```python ```` block of the final
  channel, else its last plain block, else the same on the whole text) run against all of the
  item's tests; correct when every test passes (:mod:`.livecodebench`). The reference takes
  ``ground_truth`` as the question_id and looks the tests up in LiveCodeBench's own dataset;
  here they come from the row (an ``input_output`` column, lcb_runner's evaluation sample, or
  LiveCodeBench's ``public_test_cases``/``private_test_cases``/``metadata`` columns), else
  from the LiveCodeBench release in the dataset folder, joined by question_id
  (:mod:`.lcb_release`). A LiveCodeBench row with an empty ``ground_truth`` is incorrect, as in the
  reference. The programs run in the sandbox of :mod:`.sandbox` (docs/sandbox.md), all code
  items of a log in parallel, at most :func:`.livecodebench.pool_size` at a time.

* MATH-500: the last ``\\boxed{...}`` of the whole text, judged by the PRM800K grader's rules
  (:mod:`.math500`; its sympy step runs in the sandbox, all of a log's comparisons in one
  program).

``tokens_per_sample`` (mean output tokens, for the
checker's upper bound) is added; the reference script does not print it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import progress
from ..errors import UserError
from .lcb_release import TEST_COLUMNS as LCB_TEST_COLUMNS
from .lcb_release import join_tests, read_release
from .sandbox import UNSANDBOXED_CONFIG_KEY, UNSANDBOXED_NOTE

__all__ = [
    "GptOssRows",
    "evaluate_gpt_oss",
    "extract_final_section",
    "family_of",
    "load_gpt_oss_rows",
    "parse_aime_answer",
    "parse_multiple_choice",
]

CODE_FAMILY = "livecodebench"
MATH_FAMILY = "math500"
#: Dataset columns an item's LiveCodeBench tests are read from (:func:`.livecodebench.parse_tests`):
#: this one, or LiveCodeBench's own problem columns (LCB_TEST_COLUMNS, the release's).
TEST_COLUMN = "input_output"
# Highest option letter per multiple-choice family.
MAX_OPTION = {"gpqa": "D", "mmlu_pro": "J", "mmlu": "J"}

_FINAL_SECTION = re.compile(r"<\|channel\|>final[^<]*<\|message\|>(.*?)(?:<\|return\|>|$)", re.DOTALL)
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_BOXED_INT = re.compile(r"\\boxed{\s*(\d+)\s*}")
_ANSWER_INT = re.compile(r"Answer:\s*(\d+)(?!\.)\b", re.IGNORECASE | re.MULTILINE)


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return str(value).strip()


def extract_final_section(text: str) -> str:
    """The text of harmony's ``final`` channel (up to ``<|return|>``), else the whole text.

    Anything between ``final`` and ``<|message|>`` is tolerated (models sometimes corrupt
    the marker)."""
    text = _text(text)
    match = _FINAL_SECTION.search(text)
    return match.group(1).strip() if match else text


def parse_multiple_choice(text: str, max_option: str = "D") -> str | None:
    """The chosen option letter (A..max_option), upper case, or None."""
    text = _text(text)
    if not text:
        return None
    final = _BOLD.sub(r"\1", extract_final_section(text))
    if final.startswith(("['", '["')) and final.endswith(("']", '"]')):
        final = final[2:-2].strip()
    # Outputs stored as Python reprs carry literal backslash escapes.
    final = final.replace("\\n", "\n").replace("\\'", "'")
    letters = f"A-{max_option}"
    leading = re.match(rf"^[^a-zA-Z]*([{letters}])(?:[^a-zA-Z]|$)", final.strip(), re.IGNORECASE)
    if leading:
        return leading.group(1).upper()
    stated = re.search(rf"\b(?:Answer|ANSWER)\s*[:.]?\s*([{letters}])\b", final, re.IGNORECASE)
    if stated:
        return stated.group(1).upper()
    whole = text.replace("\\n", "\n").replace("\\'", "'")
    anywhere = list(
        re.finditer(
            rf"\b(?:ANSWER|FINAL\s*ANSWER)\b\s*[:=]?\s*(?:\(?\s*([{letters}])\s*\)?)(?:\s*$|[^A-Za-z])",
            whole,
            re.IGNORECASE,
        )
    )
    if anywhere:
        return anywhere[-1].group(1).upper()
    if max_option == "J":
        standalone = list(re.finditer(rf"\b([{letters}])\b", final, re.IGNORECASE))
        if standalone:
            return standalone[-1].group(1).upper()
    return None


def parse_aime_answer(text: str) -> int | None:
    """The last boxed integer, else the last ``Answer: N``; only 0..999 counts."""
    text = _text(text)
    if not text:
        return None
    boxed = list(_BOXED_INT.finditer(text))
    found = boxed or list(_ANSWER_INT.finditer(text))
    if not found:
        return None
    value = int(found[-1].group(1))
    return value if 0 <= value <= 999 else None


def family_of(dataset_name: Any, families: Sequence[str]) -> str:
    name = _text(dataset_name).lower()
    if not name:
        raise UserError("a dataset row has an empty 'dataset' value")
    for family in families:
        if family in name:
            return family
    raise UserError(f"dataset family '{dataset_name}' has no evaluator (known: {', '.join(families)})")


def is_correct(family: str, output: str, ground_truth: Any, tests: Any = None) -> tuple[bool, Any]:
    """(correct, extracted answer) for one decoded output. ``tests`` (a
    :class:`.livecodebench.TestSuite`) is needed for the LiveCodeBench family; many code
    outputs are better scored together by :func:`evaluate_gpt_oss`, which runs them in
    parallel."""
    if family in MAX_OPTION:
        letters = "ABCDEFGHIJ"[: "ABCDEFGHIJ".index(MAX_OPTION[family]) + 1]
        parsed = parse_multiple_choice(output, MAX_OPTION[family])
        truth = _text(ground_truth).upper()
        return bool(parsed and truth and parsed in letters and parsed == truth), parsed
    if family == "aime":
        parsed = parse_aime_answer(output)
        try:
            return parsed is not None and parsed == int(ground_truth), parsed
        except (TypeError, ValueError):
            return False, parsed
    if family == CODE_FAMILY:
        from .livecodebench import extract_code, grade

        if tests is None:
            raise UserError("scoring a LiveCodeBench output needs the item's tests")
        code = extract_code(output)
        if code is None or not _text(ground_truth):
            return False, code
        return grade(code, tests).passed, code
    if family == MATH_FAMILY:
        from .math500 import grade_math_answers, parse_boxed

        parsed = parse_boxed(output)
        return grade_math_answers([(parsed, ground_truth)])[0], parsed
    raise UserError(f"the gpt-oss evaluation has no scoring rule for the '{family}' family")


@dataclass
class GptOssRows:
    """The columns the evaluation reads from a gpt-oss dataset file."""

    path: str
    datasets: list[str]
    ground_truths: list[Any]
    #: Per row, the raw LiveCodeBench tests (an ``input_output`` cell, or a dict of the
    #: LiveCodeBench problem columns); None where the file has no such column.
    tests: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.datasets)

    def test_suite(self, index: int) -> Any:
        """Row ``index``'s tests as a :class:`.livecodebench.TestSuite` (UserError naming the
        file, row and column when they are absent or malformed)."""
        from .livecodebench import parse_tests

        if self.tests is None:
            raise UserError(
                f"{self.path} has LiveCodeBench rows ('{self.datasets[index]}') but no test column: add "
                f"'{TEST_COLUMN}' (lcb_runner's evaluation sample: inputs, outputs, fn_name) or LiveCodeBench's "
                f"{', '.join(LCB_TEST_COLUMNS)} columns, or name LiveCodeBench's release (its test*.jsonl files, "
                "hf://datasets/livecodebench/code_generation_lite) as a datasets entry in the benchmark's "
                "livecodebench_release key, or put it in the dataset folder at the rules table's "
                "dataset.livecodebench_release.folder: the tests are then looked up by the question_id in "
                "ground_truth, as the reference does"
            )
        value = self.tests[index]
        column = TEST_COLUMN if not isinstance(value, Mapping) else "/".join(LCB_TEST_COLUMNS)
        return parse_tests(value, f"{self.path} row {index} column {column}")


def load_gpt_oss_rows(
    path: str | os.PathLike[str],
    families: Sequence[str] | None = None,
    lcb_release: str | os.PathLike[str] | None = None,
    lcb_version: str | None = None,
) -> GptOssRows:
    """The rows of a gpt-oss dataset file. A file as published names its LiveCodeBench items
    only by question_id: with ``lcb_release`` (a folder of LiveCodeBench's ``test*.jsonl``,
    :mod:`.lcb_release`), its ``lcb_version`` and the round's ``families``, those rows get the release's tests, as
    the reference looks them up; a test column in the file takes precedence."""
    from ..dataset_files import read_table

    frame = read_table(path)
    missing = [c for c in ("dataset", "ground_truth") if c not in frame.columns]
    if missing:
        raise UserError(
            f"dataset {path} lacks column(s) {missing}; the gpt-oss evaluation needs 'dataset' and 'ground_truth'"
        )
    datasets, ground_truths = [str(v) for v in frame["dataset"]], list(frame["ground_truth"])
    tests: list[Any] | None = None
    if TEST_COLUMN in frame.columns:
        tests = list(frame[TEST_COLUMN])
    elif any(c in frame.columns for c in LCB_TEST_COLUMNS[:2]):
        present = [c for c in LCB_TEST_COLUMNS if c in frame.columns]
        tests = [dict(zip(present, values)) for values in zip(*(frame[c] for c in present))]
    elif lcb_release is not None:
        if families is None or lcb_version is None:
            raise ValueError("joining a LiveCodeBench release needs the round's families and its version")
        tests = join_tests(
            [family_of(name, families) for name in datasets],
            [_text(truth) for truth in ground_truths],
            read_release(lcb_release, lcb_version),
            code_family=CODE_FAMILY,
            table=str(path),
            release_name=f"LiveCodeBench {lcb_version} in {lcb_release}",
        )
    return GptOssRows(str(path), datasets, ground_truths, tests)


def evaluate_gpt_oss(
    entries: Iterable[tuple[int, np.ndarray]],
    rows: GptOssRows,
    tokenizer: Any,
    *,
    families: Sequence[str],
    repeats: Mapping[str, int],
    code_workers: int | None = None,
    allow_unsandboxed: bool = False,
) -> dict[str, Any]:
    """Score ``(qsl_idx, token ids)`` pairs; returns the metrics, a per-family breakdown and
    ``sandbox``: the entries (positions in the log) whose model-written code ran, by the
    isolation mode they ran in, and whether any ran unsandboxed.

    ``families`` and ``repeats`` are the rules table's ``accuracy.families`` and
    ``accuracy.dataset_repeats`` of gpt-oss-120b. LiveCodeBench entries are extracted first
    and then run together, at most ``code_workers`` (default: :func:`.livecodebench.pool_size`)
    sandboxes at a time; each distinct row's tests are parsed once. Where the host offers
    neither namespaces nor a seccomp filter the programs run only with ``allow_unsandboxed``
    (the config's ``sandbox.allow_unsandboxed``), else a UserError."""
    entries = list(entries)
    if not entries:
        raise UserError("the accuracy log has no samples")
    groups: dict[str, str] = {}
    for qsl_idx, _ in entries:
        if not 0 <= qsl_idx < len(rows):
            raise UserError(
                f"the accuracy log has qsl_idx {qsl_idx}, but {rows.path} has {len(rows)} rows: "
                "was the run made on another dataset file?"
            )
        name = rows.datasets[qsl_idx]
        if name not in groups:
            groups[name] = family_of(name, families)
    texts = tokenizer.batch_decode([tokens.tolist() for _, tokens in entries], skip_special_tokens=False)
    modes: dict[int, str] = {}
    verdicts = _score_code_entries(entries, texts, rows, groups, code_workers, allow_unsandboxed, modes)
    verdicts.update(_score_math_entries(entries, texts, rows, groups, allow_unsandboxed, modes))
    stats: dict[str, dict[str, int]] = {}
    output_tokens = 0
    for position, ((qsl_idx, tokens), text) in enumerate(zip(entries, texts)):
        name = rows.datasets[qsl_idx].lower()
        if position in verdicts:
            correct = verdicts[position]
        else:
            correct, _ = is_correct(groups[rows.datasets[qsl_idx]], text, rows.ground_truths[qsl_idx])
        entry = stats.setdefault(name, {"correct": 0, "total": 0})
        entry["total"] += 1
        entry["correct"] += int(correct)
        output_tokens += len(tokens)
        progress.advance()
    score = sum(s["correct"] / repeats.get(n, 1) for n, s in stats.items())
    maximum = sum(s["total"] / repeats.get(n, 1) for n, s in stats.items())
    samples = sum(s["total"] for s in stats.values())
    by_mode: dict[str, list[int]] = {}
    for position, mode in sorted(modes.items()):
        by_mode.setdefault(mode, []).append(position)
    return {
        "exact_match": round(100.0 * score / maximum, 3),
        "tokens_per_sample": round(output_tokens / samples, 1),
        "gen_num": samples,
        "per_dataset": {n: dict(s, repeats=repeats.get(n, 1)) for n, s in sorted(stats.items())},
        "sandbox": {"isolation": by_mode, "unsandboxed": "unsandboxed" in by_mode},
    }


def _score_code_entries(
    entries: Sequence[tuple[int, np.ndarray]],
    texts: Sequence[str],
    rows: GptOssRows,
    groups: Mapping[str, str],
    workers: int | None,
    allow_unsandboxed: bool,
    modes: dict[int, str],
) -> dict[int, bool]:
    """Correctness of every LiveCodeBench entry, by its position in ``entries``: programs are
    extracted here and run in parallel sandboxes; no program or an empty ground truth is
    incorrect without running anything (as in the reference). ``modes`` gets the isolation
    mode of every entry whose program ran."""
    from .livecodebench import extract_code, grade_many

    verdicts: dict[int, bool] = {}
    suites: dict[int, Any] = {}
    work: list[tuple[int, str, Any]] = []
    for position, ((qsl_idx, _), text) in enumerate(zip(entries, texts)):
        if groups[rows.datasets[qsl_idx]] != CODE_FAMILY:
            continue
        if not _text(rows.ground_truths[qsl_idx]):
            verdicts[position] = False  # no question_id: incorrect, as in the reference (no tests to read)
            continue
        if qsl_idx not in suites:
            suites[qsl_idx] = rows.test_suite(qsl_idx)
        code = extract_code(text)
        if code is None:
            verdicts[position] = False
        else:
            work.append((position, code, suites[qsl_idx]))
    graded = grade_many(
        [(code, suite) for _, code, suite in work], workers=workers, allow_unsandboxed=allow_unsandboxed
    )
    for (position, _, _), verdict in zip(work, graded):
        verdicts[position] = verdict.passed
        if verdict.isolation:
            modes[position] = verdict.isolation
    return verdicts


def _score_math_entries(
    entries: Sequence[tuple[int, np.ndarray]],
    texts: Sequence[str],
    rows: GptOssRows,
    groups: Mapping[str, str],
    allow_unsandboxed: bool,
    modes: dict[int, str],
) -> dict[int, bool]:
    """Correctness of every MATH-500 entry, by its position in ``entries``; the sympy
    comparisons of all of them run in one sandboxed program (``modes`` gets its isolation mode
    for every entry that went to sympy)."""
    from .math500 import grade_math_answers_isolated, parse_boxed

    positions = [p for p, (qsl_idx, _) in enumerate(entries) if groups[rows.datasets[qsl_idx]] == MATH_FAMILY]
    items = [(parse_boxed(texts[p]), rows.ground_truths[entries[p][0]]) for p in positions]
    verdicts, isolation = grade_math_answers_isolated(items, allow_unsandboxed=allow_unsandboxed)
    modes.update((p, mode) for p, mode in zip(positions, isolation) if mode)
    return dict(zip(positions, verdicts))


def format_gpt_oss_accuracy_txt(result: Mapping[str, Any]) -> str:
    """The checker reads ``'exact_match':\\s([\\d.]+)`` and ``'tokens_per_sample':\\s([\\d.]+)``
    from one line; per-family counts follow on lines of their own."""
    head = {
        "exact_match": float(result["exact_match"]),
        "tokens_per_sample": float(result["tokens_per_sample"]),
        "gen_num": int(result["gen_num"]),
    }
    lines = ["", "Results", "", repr(head), ""]
    for name, s in result["per_dataset"].items():
        lines.append(f"{name}: {s['correct']}/{s['total']} correct, repeats {s['repeats']}")
    for mode, positions in (result.get("sandbox") or {}).get("isolation", {}).items():
        note = f" ({UNSANDBOXED_NOTE}: {UNSANDBOXED_CONFIG_KEY})" if mode == "unsandboxed" else ""
        lines.append(f"model-written code: {len(positions)} samples ran in the sandbox mode {mode}{note}")
    return "\n".join(lines) + "\n"
