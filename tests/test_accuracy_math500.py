"""MATH-500 grading (gpt-oss-120b): the boxed answer judged by the PRM800K grader's rules.

Every verdict in GRADES was also given by PRM800K's own ``grade_answer`` (openai/prm800k,
run side by side by ``bench/math500_vs_prm800k.py`` on 2026-12-02: 0 disagreements)."""

from __future__ import annotations

import os

import pytest

from mlperf_repro.accuracy.math500 import (
    _sympy_verdicts,
    grade_math_answers,
    math_equivalent_strings,
    normalize_mathd,
    parse_boxed,
)

# (ground truth, given answer, correct?)
GRADES = [
    # Step 1: the MATH normalization.
    (r"\frac{1}{2}", "0.5", True),
    (r"\frac{1}{2}", "1/2", True),
    (r"\dfrac{3}{4}", r"\frac34", True),
    (r"\sqrt{2}", r"\sqrt2", True),
    ("5", "x=5", True),
    ("6", r"6 \text{ cm}", True),
    (r"90^\circ", "90", True),
    (r"\$5", "5", True),
    (r"50\%", "50", True),
    ("0.25", ".25", True),
    # Step 2: PRM800K's normalization.
    ("10", "10.0", True),
    ("1,000", "1000", True),
    (r"\text{Monday}", "monday", True),
    ("12", r"12 \text{ inches}", True),
    ("-3", "- 3", True),
    (r"\infty", r"\infty", True),
    # Step 3: tuples and intervals, element by element.
    ("(1,2)", "(1, 2)", True),
    ("[-2,5)", "[-2, 5)", True),
    ("(1,2)", "[1,2)", False),
    ("1,2", "2,1", False),
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})", True),
    (r"\{1,2\}", "1, 2", True),
    ("3", "3 or 4", False),
    # sympy: equal expressions in another form.
    (r"3\sqrt{2}", r"\sqrt{18}", True),
    (r"2\sqrt{3}", r"\sqrt{12}", True),
    ("x^2+2x+1", "(x+1)^2", True),
    ("2x+3", "3+2x", True),
    (r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}", True),
    ("1.5", r"\frac{3}{2}", True),
    (r"7\frac{3}{4}", "31/4", True),
    # Strictness: unreduced fractions, integers against expressions, risky powers.
    (r"\frac{1}{2}", "2/4", False),
    ("4", "2+2", False),
    ("2", "2.5", False),
    (r"\pi", "3.14159", False),
    ("2^{10}", "1024", False),
    ("1000000", "1 million", False),
    (r"e^{i\pi}", "-1", False),
    # Malformed answers are compared as they are.
    (r"\frac", "x", False),
    (r"\sqrt", r"\sqrt", True),
    (r"\text{ a } \text{ b }", "a", False),
]


def test_every_verdict_is_prm800ks():
    verdicts = grade_math_answers([(given, truth) for truth, given, _ in GRADES])
    wrong = [(t, g, want) for (t, g, want), got in zip(GRADES, verdicts) if got != want]
    assert not wrong


@pytest.mark.parametrize(
    "text, answer",
    [
        (r"so \boxed{3} then \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{ \{1, \{2\}\} }", r"\{1, \{2\}\}"),
        (r"\boxed{\frac{1}{2}", None),  # never closed
        ("no box", None),
        (None, None),
    ],
)
def test_the_answer_is_the_last_boxed_content(text, answer):
    assert parse_boxed(text) == answer


def test_missing_answers_and_ground_truths_are_incorrect_without_sympy():
    assert grade_math_answers([(None, "3"), ("3", None), ("3", float("nan")), ("", "3")]) == [False] * 4
    # Strings decide these; no sympy comparison is left over.
    assert math_equivalent_strings("0.5", r"\frac{1}{2}") is True
    assert math_equivalent_strings("2+2", "4") is False
    assert math_equivalent_strings("(x+1)^2", "x^2+2x+1") == [("x^2+2x+1", "(x+1)^2")]


def test_a_malformed_latex_answer_keeps_its_text():
    assert normalize_mathd(r"a \text{ b } \text{ c }") == r"a \text{ b } \text{ c }"


def test_the_sympy_step_evaluates_in_the_sandbox_not_here(tmp_path):
    """parse_expr ends in eval: an answer that writes a file gets no further than the sandbox,
    and is simply not equal."""
    target = tmp_path / "written"
    os.chmod(tmp_path, 0o777)  # writable for the sandbox's uid: only the sandbox can stop it
    answer = f"open({str(target)!r}, 'w').write('x')"
    verdicts, isolation = _sympy_verdicts([("1", answer)], "auto")
    assert verdicts == [False] and isolation in ("namespaces+seccomp", "namespaces", "seccomp")
    assert not target.exists()
    # The answer filter alone would refuse it (too many letters), so grading never sends it.
    assert math_equivalent_strings(answer, "1") is False
