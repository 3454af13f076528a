"""MATH-500 scoring for gpt-oss-120b, by the rules the MLCommons reference applies.

The reference (``eval_accuracy.py``) reads the answer as the content of the last
``\\boxed{...}`` in the whole output (braces matched), and judges it with the PRM800K grader
(openai/prm800k ``grading/grader.py``). That grader needs no model; its rules, in order:

1. Equal after the MATH normalization of Hendrycks et al. (``math_normalize.py``: ``\\text{}``
   unwrapped, ``\\left``/``\\right``, degrees, ``\\$``, ``\\%`` and trailing ``\\text{ unit}``
   removed, ``tfrac``/``dfrac`` read as ``frac``, ``\\frac12`` and ``1/2`` written as
   ``\\frac{1}{2}``, ``\\sqrt2`` as ``\\sqrt{2}``, a short ``x =`` prefix dropped, spaces
   removed): correct.
2. Equal after PRM800K's own normalization (units and ``$``/``%`` removed, ``million`` etc. as
   powers of ten, LaTeX rendered to text by pylatexenc, mixed numbers as sums, braces and case
   dropped, integers written plainly): correct.
3. Otherwise both are split into elements when they are a tuple or interval (``(1,2]``);
   brackets and element counts must agree; then per element: two fractions must be the same
   string (an unreduced fraction is wrong), an integer must meet an integer, and anything else
   is correct when sympy simplifies the difference to 0 (skipped for more than two distinct
   letters, and for ``^{``, ``^(`` and stacked or multi-digit powers, which PRM800K avoids as
   sympy may hang).

Step 3's sympy check evaluates model-written text, so it runs in the sandbox
(:mod:`.math_sympy_check`, one program per log, 5 s per comparison); steps 1-2 and the
splitting are string work done here. sympy and pylatexenc are the reference's own tools."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

from ..errors import UserError

__all__ = [
    "grade_math_answers",
    "grade_math_answers_isolated",
    "math_equivalent_strings",
    "normalize_mathd",
    "normalize_prm",
    "parse_boxed",
]

_UNITS = (
    "degree",
    "cm",
    "centimeter",
    "meter",
    "mile",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "year",
    "foot",
    "feet",
    "inch",
    "yard",
)
_BRACKETS = "()[]"
_TEXT_WRAPPED = re.compile(r"^\\text\{(?P<text>.+?)\}$")
_GROUPED_THOUSANDS = re.compile(r"(\d),(\d\d\d)($|\D)")
_FRACTION = re.compile(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$")
_RISKY_POWERS = (re.compile(r"\^[0-9]+\^"), re.compile(r"\^[0-9][0-9]+"))


def parse_boxed(text: object) -> str | None:
    """The content of the last ``\\boxed{`` in ``text`` up to its matching brace, stripped;
    None when there is none or it is never closed."""
    text = "" if text is None else str(text).strip()
    start = text.rfind("\\boxed{")
    if start == -1:
        return None
    depth = 0
    for position in range(start + len("\\boxed{"), len(text)):
        char = text[position]
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return text[start + len("\\boxed{") : position].strip()
            depth -= 1
    return None


# -- step 1: the MATH (Hendrycks) normalization ------------------------------------------------
class _Unchanged(Exception):
    """A malformed answer: the normalization gives up and keeps it as it is."""


def _braced_fractions(text: str) -> str:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\frac1{7}`` -> ``\\frac{1}{7}``; a ``\\frac`` with
    fewer than two characters after it leaves the whole text as it was."""
    head, *parts = text.split("\\frac")
    out = [head]
    for part in parts:
        if not part:
            raise _Unchanged
        if part[0] == "{":
            out.append("\\frac" + part)
            continue
        if len(part) < 2:
            return text
        numerator, second, rest = part[0], part[1], part[2:]
        if second == "{":
            out.append("\\frac{" + numerator + "}" + second + rest)
        else:
            out.append("\\frac{" + numerator + "}{" + second + "}" + rest)
    return "".join(out)


def _slash_fraction(text: str) -> str:
    """``3/4`` (two plain integers) -> ``\\frac{3}{4}``."""
    parts = text.split("/")
    if len(parts) != 2:
        return text
    try:
        numerator, denominator = int(parts[0]), int(parts[1])
    except ValueError:
        return text
    if text != f"{numerator}/{denominator}":
        return text
    return f"\\frac{{{numerator}}}{{{denominator}}}"


def _braced_roots(text: str) -> str:
    """``\\sqrt2`` -> ``\\sqrt{2}``."""
    if "\\sqrt" not in text:
        return text
    head, *parts = text.split("\\sqrt")
    out = [head]
    for part in parts:
        if not part:
            raise _Unchanged
        out.append("\\sqrt" + (part if part[0] == "{" else "{" + part[0] + "}" + part[1:]))
    return "".join(out)


def _mathd_strip(text: str) -> str:
    text = text.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    text = text.replace("tfrac", "frac").replace("dfrac", "frac")
    text = text.replace("\\left", "").replace("\\right", "")
    text = text.replace("^{\\circ}", "").replace("^\\circ", "")
    text = text.replace("\\$", "")
    if "\\text{ " in text:  # a unit on the right
        pieces = text.split("\\text{ ")
        if len(pieces) != 2:
            raise _Unchanged
        text = pieces[0]
    text = text.replace("\\%", "")
    text = text.replace(" .", " 0.").replace("{.", "{0.")
    if not text:
        return text
    if text[0] == ".":
        text = "0" + text
    sides = text.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:  # "k = 5" -> "5"
        text = sides[1]
    text = _braced_roots(text).replace(" ", "")
    text = _braced_fractions(text)
    if text == "0.5":
        text = "\\frac{1}{2}"
    return _slash_fraction(text)


def normalize_mathd(answer: str | None) -> str | None:
    """Step 1's form of ``answer``; a malformed answer comes back as it is."""
    if answer is None:
        return None
    answer = answer.strip()
    wrapped = _TEXT_WRAPPED.search(answer)
    if wrapped:
        answer = wrapped.group("text").strip()
    try:
        return _mathd_strip(answer)
    except _Unchanged:
        return answer


# -- step 2: PRM800K's normalization -----------------------------------------------------------
def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _is_integral(value: float) -> bool:
    try:
        return abs(value - int(round(value))) <= 1e-7
    except (OverflowError, ValueError):
        return False


def _without_grouping_commas(text: str) -> str:
    """``1,000,000`` -> ``1000000``; tuple commas stay."""
    while True:
        stripped = _GROUPED_THOUSANDS.sub(r"\1\2\3", text)
        if stripped == text:
            return text
        text = stripped


def _names_an_integer(text: str) -> bool:
    value = _number(_without_grouping_commas(text))
    return value is not None and _is_integral(value)


def _latex_to_text(text: str) -> str:
    from pylatexenc import latex2text

    text = text.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac").replace("\\frac", " \\frac")
    text = latex2text.LatexNodes2Text().latex_to_text(text)
    for symbol, word in (("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"), ("×", "*")):
        text = text.replace(symbol, word)
    return text.strip()


def normalize_prm(expression: str | None) -> str | None:
    """Step 2's form of ``expression``."""
    if expression is None:
        return None
    wrapped = _TEXT_WRAPPED.search(expression)
    if wrapped:
        expression = wrapped.group("text")
    expression = expression.replace("\\%", "%").replace("\\$", "$").replace("$", "").replace("%", "")
    expression = expression.replace(" or ", " , ").replace(" and ", " , ")
    for word, power in (("million", "*10^6"), ("billion", "*10^9"), ("trillion", "*10^12")):
        expression = expression.replace(word, power)
    for unit in _UNITS:
        expression = re.sub(unit + r"(es)?(s)? *(\^[0-9]+)?", "", expression)
    expression = re.sub(r"\^ *\\circ", "", expression)
    if expression[:1] == "{" and expression[-1:] == "}":
        expression = expression[1:-1]
    expression = re.sub(r",\\! *", "", expression)
    value = _number(expression)
    if value is not None and _is_integral(value):
        expression = str(int(round(value)))
    if "\\" in expression:
        try:
            expression = _latex_to_text(expression)
        except Exception:  # noqa: BLE001 - as PRM800K: keep the text when pylatexenc fails
            pass
    expression = re.sub("- *", "-", expression)
    expression = re.sub("([0-9]) +([0-9])", r"\1+\2", expression)  # mixed number 7 3/4 -> 7+3/4
    expression = expression.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _names_an_integer(expression):
        expression = str(int(float(expression.replace(",", ""))))
    return expression


def _elements(expression: str) -> list[str]:
    """A tuple's or interval's elements, else the expression alone."""
    expression = _without_grouping_commas(expression)
    if not expression:
        return []
    inner = expression[1:-1]
    if (
        len(expression) > 2
        and expression[0] in _BRACKETS
        and expression[-1] in _BRACKETS
        and not any(b in inner for b in _BRACKETS)
    ):
        return [element.strip() for element in inner.split(",")]
    return [expression]


def _sympy_may_run(expression: str) -> bool:
    letters = {c for c in expression.replace("sqrt", "").replace("frac", "") if c.isalpha()}
    if len(letters) > 2 or "^{" in expression or "^(" in expression:
        return False
    return not any(pattern.search(expression) for pattern in _RISKY_POWERS)


def math_equivalent_strings(given: str | None, truth: str) -> bool | list[tuple[str, str]]:
    """Steps 1-3 without sympy: True or False when strings decide, else the ``(truth, given)``
    element pairs that must all simplify to a zero difference."""
    if given is None:
        return False
    if normalize_mathd(truth) == normalize_mathd(given):
        return True
    truth_n, given_n = normalize_prm(truth), normalize_prm(given)
    if truth_n is None:
        return False
    if truth_n == given_n:
        return True
    if not given_n:
        return False
    truth_elements, given_elements = _elements(truth_n), _elements(given_n)
    if len(truth_elements) > 1 and (truth_n[0] != given_n[0] or truth_n[-1] != given_n[-1]):
        return False
    if len(truth_elements) != len(given_elements):
        return False
    pending: list[tuple[str, str]] = []
    for truth_element, given_element in zip(truth_elements, given_elements):
        if _FRACTION.search(truth_element) and _FRACTION.search(given_element):
            if truth_element != given_element:  # an unreduced fraction is wrong
                return False
        elif _names_an_integer(truth_element) != _names_an_integer(given_element):
            return False
        elif _sympy_may_run(f"({truth_element})-({given_element})"):
            pending.append((truth_element, given_element))
        else:
            return False
    return pending or True


def _sympy_verdicts(
    pairs: Sequence[tuple[str, str]], isolation: str = "auto", allow_unsandboxed: bool = False
) -> tuple[list[bool], str | None]:
    """Run :mod:`.math_sympy_check` on ``pairs`` in one sandboxed program: the verdicts and the
    isolation mode it ran in (None: no pair, nothing ran)."""
    from .math_sympy_check import SECONDS_PER_PAIR
    from .sandbox import Limits, default_python, run_python

    if not pairs:
        return [], None
    import importlib.util

    source = (Path(__file__).with_name("math_sympy_check.py")).read_text()
    # The sandbox may run the system's python: it imports the evaluator's own sympy and mpmath.
    paths = []
    for module in ("sympy", "mpmath"):
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin:
            raise UserError(f"MATH-500 grading needs {module}: install it (./install.sh does)")
        paths.append(str(Path(spec.origin).parent.parent))
    paths = sorted(set(paths))
    request = {"pairs": [list(p) for p in pairs]}
    # sympy's import takes a few seconds; then at most SECONDS_PER_PAIR per comparison.
    seconds = 60 + SECONDS_PER_PAIR * len(pairs)
    limits = Limits(cpu_seconds=seconds, wall_seconds=seconds, memory_bytes=4 << 30, output_bytes=1 << 20)
    result = run_python(
        source,
        json.dumps(request),
        limits,
        isolation=isolation,  # type: ignore[arg-type]
        allow_unsandboxed=allow_unsandboxed,
        read_only=paths,
    )
    if not result.ok:
        message = result.stderr.decode(errors="replace").strip().splitlines()[-1:] or [result.killed or "no output"]
        if "No module named" in message[0]:
            raise UserError(
                f"MATH-500 grading runs sympy in the sandbox, whose interpreter {default_python()} could not "
                f"import it from {', '.join(paths)} ({message[0]}): the sandbox's uid must be able to read that folder"
            )
        raise UserError(f"the sandboxed MATH-500 sympy check failed: {message[0]}")
    verdicts = json.loads(result.stdout)
    if len(verdicts) != len(pairs):
        raise UserError(f"the sandboxed MATH-500 sympy check answered {len(verdicts)} of {len(pairs)} comparisons")
    return [bool(v) for v in verdicts], result.isolation


def grade_math_answers(
    items: Sequence[tuple[str | None, object]], *, isolation: str = "auto", allow_unsandboxed: bool = False
) -> list[bool]:
    """Correctness of ``(given answer, ground truth)`` pairs, in order. ``given`` is
    :func:`parse_boxed`'s result; a missing answer or ground truth is incorrect."""
    return grade_math_answers_isolated(items, isolation=isolation, allow_unsandboxed=allow_unsandboxed)[0]


def grade_math_answers_isolated(
    items: Sequence[tuple[str | None, object]], *, isolation: str = "auto", allow_unsandboxed: bool = False
) -> tuple[list[bool], list[str | None]]:
    """:func:`grade_math_answers`, and for each item the sandbox isolation mode its sympy check
    ran in (None: decided without running sympy on model-written text)."""
    decided: list[bool | list[tuple[str, str]]] = []
    for given, truth in items:
        missing = truth is None or (isinstance(truth, float) and math.isnan(truth))
        truth_text = "" if missing else str(truth)
        given_text = None if given is None else str(given).strip()
        if not given_text or not truth_text:
            decided.append(False)
        else:
            decided.append(math_equivalent_strings(given_text, truth_text))
    pairs = [pair for verdict in decided if isinstance(verdict, list) for pair in verdict]
    verdicts, mode = _sympy_verdicts(pairs, isolation, allow_unsandboxed)
    answers = iter(verdicts)
    results, modes = [], []
    for verdict in decided:
        if isinstance(verdict, list):
            results.append(all([next(answers) for _ in verdict]))
            modes.append(mode)
        else:
            results.append(verdict)
            modes.append(None)
    return results, modes
