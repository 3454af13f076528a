"""LiveCodeBench scoring: program extraction as the reference's parse_code does it, the test
formats a dataset row may carry, and grading real programs in the sandbox with lcb_runner's
comparison rules (stdin/stdout and call-based tests)."""

from __future__ import annotations

import base64
import json
import os
import pickle
import time
import zlib

import pytest

from mlperf_repro.accuracy.livecodebench import (
    TestSuite,
    extract_code,
    grade,
    grade_many,
    parse_tests,
    pool_size,
)
from mlperf_repro.errors import UserError

HARMONY = (
    "<|channel|>analysis<|message|>{analysis}<|end|><|start|>assistant<|channel|>final<|message|>{final}<|return|>"
)
ADD = TestSuite(["1 2\n", "30 12\n"], ["3\n", "42\n"])


@pytest.mark.parametrize(
    "text, expected",
    [
        # The final channel's last python block, not the analysis draft.
        (
            HARMONY.format(
                analysis="```python\nprint('draft')\n```",
                final="First:\n```python\nprint(1)\n```\nBetter:\n```python\nprint(2)\n```",
            ),
            "print(2)",
        ),
        # A python block wins over a later plain block.
        (HARMONY.format(analysis="x", final="```python\nprint(1)\n```\n```\nplain\n```"), "print(1)"),
        # A plain block in the final channel, its py tag dropped, case-insensitively.
        (HARMONY.format(analysis="```python\nprint('draft')\n```", final="```Py\nprint(3)\n```"), "print(3)"),
        # No block in the final channel: the whole text's last python block (here the analysis').
        (HARMONY.format(analysis="```python\nprint('draft')\n```", final="see above"), "print('draft')"),
        # Not harmony: the last python block of the text.
        ("```python\na=1\n```\ntext\n```python\nb=2\n```", "b=2"),
        # The reference's literal tag match keeps the 3 of ```python3.
        ("```python3\nprint(4)\n```", "3\nprint(4)"),
        ("no code at all", None),
        ("", None),
        (None, None),
    ],
)
def test_extraction_follows_the_reference(text, expected):
    assert extract_code(text) == expected


def _compressed(tests: list[dict]) -> str:
    """LiveCodeBench code_generation_lite's encoding of private tests."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def test_tests_from_an_evaluation_sample_and_from_livecodebench_columns():
    sample = {"inputs": ["1 2\n"], "outputs": ["3\n"], "fn_name": None}
    assert parse_tests(json.dumps(sample), "f row 0") == TestSuite(["1 2\n"], ["3\n"], None)
    assert parse_tests(sample, "f row 0") == TestSuite(["1 2\n"], ["3\n"], None)
    public = [{"input": "[1, 2]\n3", "output": "true", "testtype": "functional"}]
    private = [{"input": "[4]\n4", "output": "true", "testtype": "functional"}]
    columns = {
        "public_test_cases": json.dumps(public),
        "private_test_cases": _compressed(private),
        "metadata": json.dumps({"func_name": "hasSum"}),
    }
    # Public tests first, then the private ones; fn_name from the metadata.
    assert parse_tests(columns, "f row 1") == TestSuite(["[1, 2]\n3", "[4]\n4"], ["true", "true"], "hasSum")


class _Boom:
    def __reduce__(self):
        return (print, ("unpickled code ran",))


def test_private_tests_that_are_not_a_plain_pickled_string_are_refused(capsys):
    hostile = base64.b64encode(zlib.compress(pickle.dumps(_Boom()))).decode()
    with pytest.raises(UserError, match=r"data\.parquet row 3 private_test_cases.*refusing"):
        parse_tests({"public_test_cases": "[]", "private_test_cases": hostile}, "data.parquet row 3")
    assert "unpickled code ran" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "value, message",
    [
        ({"inputs": ["1"], "outputs": []}, "same length"),
        ({"inputs": [], "outputs": []}, "no tests"),
        ({"inputs": [1], "outputs": [2]}, "strings"),
        ({"inputs": ["1"], "outputs": ["2"], "fn_name": "not a name"}, "identifier"),
        ("{not json", "not valid JSON"),
        ({"question_id": "abc"}, "neither"),
    ],
)
def test_malformed_tests_name_the_place(value, message):
    with pytest.raises(UserError, match=rf"acc\.parquet row 7.*{message}"):
        parse_tests(value, "acc.parquet row 7 column input_output")


def test_a_correct_stdin_program_passes_every_test():
    verdict = grade("a, b = map(int, input().split())\nprint(a + b)", ADD)
    assert verdict.passed and verdict.tests_passed == 2 == verdict.tests


@pytest.mark.parametrize(
    "code",
    [
        # lcb_runner's prelude: math names and the process's stdin (it reads the test input there).
        "a, b = map(int, stdin.read().split())\nprint(gcd(a, b) * (a + b) // gcd(a, b))",
        # Output compared after stripping: trailing blanks and newlines do not matter.
        "import sys\na, b = map(int, sys.stdin.readline().split())\nprint(' ', a + b, '  \\n\\n')",
        # Numbers compared as Decimals when the text differs: 3.0 == 3, 4.2e1 == 42.
        "a, b = map(int, input().split())\nprint('3.0' if a == 1 else '4.2e1')",
        # exit() ends a test normally; what was printed counts.
        "a, b = map(int, input().split())\nprint(a + b)\nexit()\nprint('never')",
        # A __main__ guard runs.
        "def main():\n    a, b = map(int, input().split())\n    print(a + b)\nif __name__ == '__main__':\n    main()",
    ],
)
def test_stdin_comparison_rules(code):
    assert grade(code, ADD).passed, grade(code, ADD)


@pytest.mark.parametrize(
    "code",
    [
        # As in lcb_runner (tests/lcb_corpus.py has them all, with the reference's verdicts):
        "a, b = map(int, open(0).read().split())\nprint(a + b)",  # open() is the real one: empty
        "import sys\nfor line in sys.stdin:\n    print(sum(map(int, line.split())))",  # not iterable
        "a, b = map(int, input().split())\nprint(a + b)\nquit()",  # quit is None
        "n = 0\ndef f(a, b):\n    global n\n    n += 1\n    return a + b\nprint(f(*map(int, input().split())))",
        "from __future__ import annotations\na, b = map(int, input().split())\nprint(a + b)",
        "def main():\n    print(sum(map(int, input().split())))\nif __name__ == '__main__':\n    main()\nEND = 1",
    ],
)
def test_stdin_programs_run_as_lcb_runner_runs_them(code):
    assert not grade(code, ADD).passed


def test_a_wrong_answer_on_a_later_test_stops_there():
    verdict = grade("a, b = map(int, input().split())\nprint(3)", ADD)
    assert not verdict.passed and verdict.tests_passed == 1 and "Wrong Answer" in verdict.reason
    extra_line = grade("a, b = map(int, input().split())\nprint(a + b)\nprint()\nprint(0)", ADD)
    assert not extra_line.passed


@pytest.mark.parametrize(
    "code, reason",
    [
        ("def broken(:\n    pass", "Compilation Error"),
        ("raise ValueError('boom')", "Runtime Error"),
        ("import time\ntime.sleep(30)", "Time Limit Exceeded"),
        ("while True:\n    pass", "Time Limit Exceeded"),
    ],
)
def test_errors_and_timeouts_fail_the_item(code, reason):
    start = time.monotonic()
    verdict = grade(code, ADD, timeout_s=1)
    assert not verdict.passed and reason in verdict.reason
    assert time.monotonic() - start < 6


@pytest.mark.slow
def test_a_program_that_swallows_the_timeout_once_gets_it_again():
    # Without the repeating timer this would run to the item's wall clock, (1 + 1) x 2 + 5 s.
    code = "try:\n    while True:\n        pass\nexcept BaseException:\n    pass\nwhile True:\n    pass"
    start = time.monotonic()
    verdict = grade(code, ADD, timeout_s=1)
    assert not verdict.passed and "Time Limit Exceeded" in verdict.reason
    assert time.monotonic() - start < 5


def test_stderr_is_not_judged():
    code = "import sys\na, b = map(int, input().split())\nsys.stderr.write('debug ' * 500000)\nprint(a + b)"
    assert grade(code, ADD).passed


def test_a_program_cannot_forge_the_verdict():
    forged = json.dumps({"passed": 2, "total": 2, "error": None, "details": {}}).encode()
    code = f"import os\nos.write(1, {forged!r})\nos._exit(0)"
    verdict = grade(code, ADD)
    assert not verdict.passed and "without a verdict" in verdict.reason


def test_a_hostile_program_fails_and_the_evaluator_survives():
    fork_bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    verdict = grade(fork_bomb, ADD, timeout_s=1)
    assert not verdict.passed


def test_call_based_tests():
    suite = TestSuite(["[2, 7, 11, 15]\n9", "[3, 2, 4]\n6"], ["[0, 1]", "[1, 2]"], "twoSum")
    solution = (
        "class Solution:\n"
        "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n"
        "        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n"
        "                return (seen[target - x], i)\n"  # a tuple counts as the list
        "            seen[x] = i\n"
    )
    assert grade(solution, suite).passed
    wrong = solution.replace("(seen[target - x], i)", "(i, seen[target - x])")
    verdict = grade(wrong, suite)
    assert not verdict.passed and verdict.tests_passed == 0 and "Wrong Answer" in verdict.reason
    # A module-level function serves when there is no Solution class.
    assert grade("def twoSum(nums, target):\n    return [0, 1] if target == 9 else [1, 2]", suite).passed
    missing = grade("class Solution:\n    pass", suite)
    assert not missing.passed and "Runtime Error" in missing.reason


@pytest.mark.slow
def test_items_are_graded_in_parallel_in_input_order():
    suite = TestSuite(["5\n"], ["10\n"])
    items = [
        ("import time\ntime.sleep(1)\nprint(int(input()) * 2)", suite),
        ("import time\ntime.sleep(1)\nprint(int(input()) * 3)", suite),
        (None, suite),
        ("import time\ntime.sleep(1)\nprint(int(input()) * 2)", suite),
        ("import time\ntime.sleep(1)\nprint(int(input()) * 2)", suite),
    ]
    start = time.monotonic()
    verdicts = grade_many(items, workers=2)
    elapsed = time.monotonic() - start
    assert [v.passed for v in verdicts] == [True, False, False, True, True]
    assert verdicts[2].reason == "no code extracted from the output"
    if pool_size(requested=2) == 2:
        assert elapsed < 3.8  # one at a time would take at least 4 s


def test_pool_is_bounded_by_cores_and_memory():
    assert pool_size(memory_bytes=1 << 50) == 1  # no machine holds two petabyte-sized items
    assert pool_size(memory_bytes=1 << 20, requested=1) == 1
    assert 1 <= pool_size() <= len(os.sched_getaffinity(0))


def test_is_correct_scores_one_code_output():
    from mlperf_repro.accuracy.gpt_oss import is_correct

    output = "<|channel|>final<|message|>```python\na, b = map(int, input().split())\nprint(a + b)\n```<|return|>"
    assert is_correct("livecodebench", output, "q1", ADD) == (True, "a, b = map(int, input().split())\nprint(a + b)")
    assert is_correct("livecodebench", output, None, ADD)[0] is False  # no ground truth: incorrect, as the reference
    with pytest.raises(UserError, match="tests"):
        is_correct("livecodebench", output, "q1")
