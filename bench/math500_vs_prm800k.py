"""Our MATH-500 grader (mlperf_repro.accuracy.math500) against PRM800K's own grade_answer, the
one the MLCommons gpt-oss reference runs, on the same answer pairs.

    .venv/bin/python bench/math500_vs_prm800k.py --prm800k DIR

DIR: a checkout of the public repository openai/prm800k (its prm800k/grading package is
imported from there; nothing of it is copied here). The pairs: every form of every answer
below against every answer's canonical form (equivalent forms, unreduced fractions, tuples,
intervals, units, LaTeX variants, expressions sympy must simplify). Prints the agreement, the
pairs where the two differ, and both graders' time."""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mlperf_repro.accuracy.math500 import grade_math_answers  # noqa: E402

# Canonical answer first, then other ways a model writes it (right or wrong).
FORMS = [
    [r"\frac{1}{2}", "0.5", "1/2", "2/4", r"\dfrac12", ".5"],
    [r"\frac{3}{4}", r"\tfrac{3}{4}", "0.75", "3/4", "6/8"],
    ["10", "10.0", "10.00", r"10\text{ cm}", "x = 10", "ten"],
    ["1,000", "1000", "1000.0", "10^3", "1 thousand"],
    [r"3\sqrt{2}", r"\sqrt{18}", r"3 \sqrt 2", r"\sqrt{2}\cdot 3", "4.2426"],
    [r"2\sqrt{3}", r"\sqrt{12}", r"2\sqrt3", r"\sqrt{3}+\sqrt{3}"],
    ["(1,2)", "(1, 2)", "[1,2)", "(2,1)", "1,2"],
    ["[-2,5)", "[-2, 5)", "(-2,5)", r"\left[ -2, 5 \right)"],
    [r"\text{Monday}", "monday", "Monday", r"\textbf{Monday}", "Tuesday"],
    [r"90^\circ", "90", r"90^{\circ}", "90 degrees", r"\frac{\pi}{2}"],
    ["x^2+2x+1", "(x+1)^2", "x^2 + 2x + 1", "(x+1)(x+1)", "x^2+1"],
    ["2x+3", "3+2x", "2 x + 3", "x+x+3", "2x-3"],
    [r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}", r"\sqrt{3}/2", "0.866"],
    [r"7\frac{3}{4}", "31/4", "7.75", r"\frac{31}{4}", "7 3/4"],
    ["-3", "- 3", "-3.0", r"-\frac{6}{2}", "3"],
    [r"\pi", "3.14159", r"\pi r", "pi"],
    [r"\$5", "5", r"5\text{ dollars}", "$5$", "5.00"],
    [r"50\%", "50", "0.5", r"50 \%", "50 percent"],
    ["2^{10}", "1024", "2^10", r"2^{10}"],
    [r"\{1,2\}", "1, 2", r"\{2,1\}", "1 and 2", "{1,2}"],
    [r"\infty", "inf", r"+\infty", "infinity"],
    ["1000000", "1 million", "10^6", "1,000,000"],
    [r"e^{i\pi}", "-1", r"e^{\pi i}"],
    [r"\frac{a+b}{2}", r"\frac{b+a}{2}", "(a+b)/2", r"\frac{a}{2}+\frac{b}{2}"],
    ["12", r"12 \text{ inches}", "12 in", "1 foot"],
    ["0", "0.0", "-0", "zero", r"\emptyset"],
    [r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})", r"(3, \pi/2)", r"(3,\frac{\pi}{3})"],
    [r"y = 2x", "2x", "y=2x", "x"],
    [r"\frac", r"\sqrt", r"\boxed{", "", " "],
]


def pairs() -> list[tuple[str, str]]:
    """(ground truth, given) for every canonical answer and every form of every answer."""
    truths = [forms[0] for forms in FORMS]
    givens = list(itertools.chain.from_iterable(FORMS))
    return [(truth, given) for truth in truths for given in givens]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prm800k", required=True, help="a checkout of openai/prm800k")
    args = parser.parse_args()
    grading = Path(args.prm800k) / "prm800k"
    if not (grading / "grading" / "grader.py").is_file():
        parser.error(f"{grading}/grading/grader.py not found: --prm800k is a checkout of openai/prm800k")
    sys.path.insert(0, str(grading))
    from grading.grader import grade_answer

    cases = pairs()
    start = time.perf_counter()
    theirs = []
    for truth, given in cases:
        try:
            theirs.append(bool(given) and bool(truth) and grade_answer(given, truth))
        except Exception:  # noqa: BLE001 - the reference's caller counts an error as incorrect
            theirs.append(False)
    their_s = time.perf_counter() - start
    start = time.perf_counter()
    ours = grade_math_answers([(given, truth) for truth, given in cases])
    our_s = time.perf_counter() - start
    differ = [(t, g, a, b) for (t, g), a, b in zip(cases, theirs, ours) if a != b]
    print(f"pairs: {len(cases)}, correct by PRM800K: {sum(theirs)}, by ours: {sum(ours)}")
    print(f"disagreements: {len(differ)}")
    for truth, given, their, our in differ:
        print(f"  truth {truth!r} given {given!r}: PRM800K {their}, ours {our}")
    print(f"time: PRM800K {their_s:.1f} s (in process), ours {our_s:.1f} s (sympy step in the sandbox)")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
