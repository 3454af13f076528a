"""The one step of MATH-500 grading that evaluates model-written text: is ``truth - given``
zero under ``sympy.simplify``? ``sympy.parsing.sympy_parser.parse_expr`` ends in ``eval``, so
this file runs as its own program inside the sandbox (:mod:`.sandbox`), never imported by the
evaluator. It reads ``{"pairs": [[truth, given], ...]}`` on stdin and prints a JSON list of
booleans. It imports nothing but the standard library and sympy: the evaluator's own sympy and
mpmath, whose folders the sandbox makes readable and names in ``MLPERF_REPRO_SANDBOX_READ_ONLY``
(the sandbox's interpreter may be the system's).

The rules are PRM800K's (``grading/grader.py``, which the MLCommons gpt-oss reference calls):
``^`` is power, implicit multiplication and function application are allowed, any error means
"not equal". One addition: a pair that takes longer than ``SECONDS_PER_PAIR`` is "not equal"
(the reference has no limit and would hang; its own comment says sympy might)."""

import json
import signal
import sys

SECONDS_PER_PAIR = 5


class _TooSlow(BaseException):
    """Not an Exception, so no ``except Exception`` inside sympy swallows it."""


def _alarm(signum, frame):
    raise _TooSlow()


def difference_is_zero(truth: str, given: str) -> bool:
    import sympy
    from sympy.parsing import sympy_parser

    transformations = sympy_parser.standard_transformations + (sympy_parser.implicit_multiplication_application,)
    try:
        difference = sympy_parser.parse_expr(f"({truth})-({given})".replace("^", "**"), transformations=transformations)
        return bool(sympy.simplify(difference) == 0)
    except Exception:
        return False


def main() -> None:
    import os

    request = json.load(sys.stdin)
    sys.path[:0] = [p for p in os.environ.get("MLPERF_REPRO_SANDBOX_READ_ONLY", "").split(os.pathsep) if p]
    pairs = request["pairs"]
    signal.signal(signal.SIGALRM, _alarm)
    verdicts = []
    for truth, given in pairs:
        verdict = False
        # Fires again every second in case something swallowed the first one.
        signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_PAIR, 1)
        try:
            try:
                verdict = difference_is_zero(truth, given)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _TooSlow:  # also when it fired between the verdict and the cancel
            pass
        verdicts.append(verdict)
    json.dump(verdicts, sys.stdout)


if __name__ == "__main__":
    main()
