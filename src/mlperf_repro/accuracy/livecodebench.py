"""LiveCodeBench scoring for gpt-oss-120b: the program the model wrote, run against the
item's tests in the sandbox (:mod:`.sandbox`); an item is correct when every test passes.

What the reference (``eval_accuracy.py`` / ``eval_mlperf_accuracy.py`` with the
LiveCodeBench ``lcb_runner`` it calls, release_v6) does, and so what this does:

* Extraction (``parse_code``): in a harmony output with a ``final`` channel, the last
  ```` ```python ```` block of that channel, else its last plain ```` ``` ```` block (a leading
  ``python``/``py`` tag line removed, case-insensitively); when the final channel has no block
  or there is no final channel, the same two rules on the whole text. The tag match is
  literal: ```` ```python3 ```` keeps a stray ``3`` (as in the reference). No block: incorrect.
* Tests: all of the item's public and private tests, in that order, run as lcb_runner's
  ``run_test`` runs them, in one process per item. Every program runs after the prelude text
  :data:`PRELUDE` (the star imports of string, re, datetime, collections, heapq, bisect, copy,
  math, random, statistics, itertools, functools, operator, io, sys, json, builtins, typing;
  the same modules but builtins and typing as names, so ``typing.List`` needs an import;
  recursion limit 50000), in a module that is not ``__main__``, with reliability_guard's
  removals (``quit``, ``help``, ``os.getcwd`` and the other os/shutil functions set to None,
  ``resource`` and a few modules unimportable). ``from __future__`` therefore fails (it is no
  longer first), as in the reference.
  ``fn_name`` (the problem's ``metadata.func_name``) absent: stdin/stdout tests. A last
  ``if __name__ == '__main__':`` block is replaced by its body (another ``__main__`` guard does
  not run); the top-level imports run once after the prelude and the rest of the program becomes
  a function, called once per test (so ``global x`` in a nested function finds no ``x``, and
  ``globals()`` lacks the program's names). During a test ``sys.stdin`` is lcb_runner's mock:
  ``read()`` the whole input, ``readline()`` line by line, ``readlines()`` the input split on
  newlines, ``buffer.read()`` its bytes, and it cannot be iterated (``for line in sys.stdin``
  fails). The process's own stdin (what ``from sys import stdin`` or the prelude's ``stdin``
  bound) answers ``read()``/``readlines()`` the same way and ``readline()`` with the lines
  without their newline; ``builtins.open`` gives the input, but a program's ``open`` is the
  prelude's real one, so ``open(0)`` reads nothing. sys.argv is the reference evaluator's
  command line (``fileinput`` reads those files). ``SystemExit`` ends a test normally. The
  output and the expected text are compared line by line after stripping the whole text and
  each line, a line matching exactly or as equal lists of ``Decimal`` numbers.
  ``fn_name`` present: call-based tests: the program, after the prelude, is loaded once;
  ``Solution().<fn_name>`` (when the text has ``class Solution``, else a module-level function)
  called with one JSON value per input line, a tuple result read as a list, compared with
  ``==`` to the JSON expected output. The first failing test ends the item.
  One difference that changes no verdict: the reference's per-test timeout is an ``Exception``
  raised once (a program catching ``Exception`` can swallow it), ours a ``BaseException``
  repeated every second, so a program that swallows it still times out.
* Timeouts: the reference passes 60 s per test to lcb_runner, and bounds an item by
  (timeout + 1) x tests + 5 s.
* Ground truth: the reference's ``ground_truth`` of a LiveCodeBench row is the question_id,
  whose tests it looks up in LiveCodeBench's own dataset. This module reads the tests from
  the row instead (see :func:`parse_tests`); a row without them cannot be scored.

Run side by side (2026-12-06, bench/accuracy_reference.py): on the 360 answers of
tests/lcb_corpus.py (every rule above, right, wrong and almost-right answers), against
MLCommons' ``parse_code`` (mlcommons/inference b66003e) and lcb_runner's ``check_correctness``
(LiveCodeBench b1e7cab, the commit the gpt-oss-120b submodule pins), with a 2 s per-test
timeout: 30 verdicts differed before the execution model above was reproduced, none after;
tests/test_accuracy_lcb_reference.py checks the recorded reference verdicts. No remaining
difference is documented as justified.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import re
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from .sandbox import Limits, best_isolation, run_python

__all__ = [
    "PER_TEST_TIMEOUT_S",
    "TestSuite",
    "Verdict",
    "extract_code",
    "grade",
    "grade_many",
    "parse_tests",
    "pool_size",
]

#: lcb_runner's per-test timeout as the reference calls it (``timeout=60``).
PER_TEST_TIMEOUT_S = 60.0
#: Address-space limit of one item's process (lcb_runner's reliability_guard mentions 4 GB).
ITEM_MEMORY_BYTES = 4 << 30

_FINAL_SECTION = re.compile(r"<\|channel\|>final[^<]*<\|message\|>(.*?)(?:<\|return\|>|$)", re.DOTALL)
_PYTHON_BLOCK = re.compile(r"```python(.*?)```", re.DOTALL)
_PLAIN_BLOCK = re.compile(r"```(.*?)```", re.DOTALL)
_LANGUAGE_TAG = re.compile(r"^(?:python|py)\s*\n", re.IGNORECASE)


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value).strip()


def _last_block(text: str) -> str | None:
    python = list(_PYTHON_BLOCK.finditer(text))
    if python:
        return python[-1].group(1).strip()
    plain = list(_PLAIN_BLOCK.finditer(text))
    if plain:
        return _LANGUAGE_TAG.sub("", plain[-1].group(1).strip())
    return None


def extract_code(output: Any) -> str | None:
    """The program in a decoded model output, or None (rules in the module docstring)."""
    text = _text(output)
    if not text:
        return None
    match = _FINAL_SECTION.search(text)
    final = match.group(1).strip() if match else text
    if final != text:
        code = _last_block(final)
        if code is not None:
            return code
    return _last_block(text)


@dataclass(frozen=True)
class TestSuite:
    """One item's tests in lcb_runner's evaluation-sample form."""

    __test__ = False  # not a pytest test class

    inputs: list[str]
    outputs: list[str]
    fn_name: str | None = None

    def __len__(self) -> int:
        return len(self.inputs)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str
    tests_passed: int = 0
    tests: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    # The sandbox's isolation mode the program ran in (SandboxResult.isolation); None when
    # nothing ran (no program extracted).
    isolation: str | None = None


class _StrOnlyUnpickler(pickle.Unpickler):
    """LiveCodeBench's compressed private tests are a pickled JSON string: refuse anything that
    would construct an object (unpickling a dataset must not run code)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _test_list(value: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(value, list | tuple):
        return list(value)
    text = _text(value)
    if not text:
        return []
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError:
        try:
            raw = zlib.decompress(base64.b64decode(text.encode()))
            loaded = json.loads(_StrOnlyUnpickler(io.BytesIO(raw)).load())
        except Exception as exc:
            raise UserError(f"{where}: not JSON, nor LiveCodeBench's base64/zlib/pickle encoding ({exc})") from None
    if not isinstance(loaded, list):
        raise UserError(f"{where}: expected a list of tests, got {type(loaded).__name__}")
    return loaded


def parse_tests(value: Any, where: str) -> TestSuite:
    """An item's tests from a dataset cell (``where`` names file, row and column for errors).

    Accepted: lcb_runner's evaluation sample ``{"inputs": [...], "outputs": [...], "fn_name":
    name or null}`` (a dict or its JSON text, the ``input_output`` column), or LiveCodeBench's
    own problem columns as a mapping ``{"public_test_cases", "private_test_cases",
    "metadata"}`` (JSON texts; private tests may be base64(zlib(pickle(JSON))) as in
    ``code_generation_lite``), tests being ``{"input", "output", "testtype"}``."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(value, Mapping):
        raise UserError(f"{where}: expected an object with 'inputs' and 'outputs', got {type(value).__name__}")
    if "inputs" in value or "outputs" in value:
        inputs, outputs, fn_name = value.get("inputs"), value.get("outputs"), value.get("fn_name")
    elif "public_test_cases" in value or "private_test_cases" in value:
        tests = _test_list(value.get("public_test_cases"), f"{where} public_test_cases") + _test_list(
            value.get("private_test_cases"), f"{where} private_test_cases"
        )
        try:
            inputs = [t["input"] for t in tests]
            outputs = [t["output"] for t in tests]
        except (KeyError, TypeError):
            raise UserError(f"{where}: every test needs 'input' and 'output'") from None
        metadata = value.get("metadata") or {}
        if isinstance(metadata, str):
            try:
                metadata = json.loads(metadata) if metadata.strip() else {}
            except json.JSONDecodeError as exc:
                raise UserError(f"{where} metadata: not valid JSON ({exc})") from None
        fn_name = metadata.get("func_name") if isinstance(metadata, Mapping) else None
    else:
        raise UserError(f"{where}: has neither 'inputs'/'outputs' nor 'public_test_cases'/'private_test_cases'")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise UserError(f"{where}: 'inputs' and 'outputs' must be lists of the same length")
    if not inputs:
        raise UserError(f"{where}: the item has no tests")
    if not all(isinstance(x, str) for x in inputs + outputs):
        raise UserError(f"{where}: test inputs and outputs must be strings (JSON text for call-based tests)")
    if fn_name is not None and not (isinstance(fn_name, str) and fn_name.isidentifier()):
        raise UserError(f"{where}: fn_name {fn_name!r} is not a Python identifier")
    return TestSuite(list(inputs), list(outputs), fn_name or None)


#: The modules lcb_runner's prelude star-imports, in its order, and those it also imports as
#: names (``builtins`` and ``typing`` only star-imported: ``typing.List`` needs an import).
PRELUDE_STAR_MODULES = (
    "string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
    "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing",
)  # fmt: skip
PRELUDE_NAMED_MODULES = tuple(m for m in PRELUDE_STAR_MODULES if m not in ("builtins", "typing"))
#: The text every program is run after (its names, recursion limit 50000).
PRELUDE = "\n".join(
    [f"from {m} import *" for m in PRELUDE_STAR_MODULES]
    + [f"import {m}" for m in PRELUDE_NAMED_MODULES]
    + ["sys.setrecursionlimit(50000)", ""]
)
#: What lcb_runner's reliability_guard sets to None before a program runs (os functions, shutil
#: functions, modules made unimportable); subprocess.Popen, quit and help too.
_GUARD = {
    "os": [
        "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
        "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
        "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir",
    ],
    "shutil": ["rmtree", "move", "chown"],
    "modules": ["ipdb", "joblib", "resource", "psutil", "tkinter"],
}  # fmt: skip
#: sys.argv as a program sees it: the reference's evaluator command line (a program reading
#: the files it names, fileinput with no arguments, reads them there: never its test input).
_ARGV = ["eval_mlperf_accuracy.py", "--mlperf-log", "mlperf_log_accuracy.json", "--reference-data", "dataset.pkl"]


# The program that runs inside the sandbox: it reads the untrusted code and the tests from
# stdin, runs the tests in order and writes one JSON verdict to a private copy of stdout (fd 1
# itself then points to /dev/null, so what the code writes to fd 1 cannot forge it).
_HARNESS = r"""
import ast, builtins, io, json, os, signal, sys, types
from decimal import Decimal, InvalidOperation

payload = json.loads(sys.stdin.read())
report = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.dup2(null, 2)  # what the program writes to stderr is not judged (nor capped into a failure)
os.close(null)
# The process's own stdin is empty, as in lcb_runner's test process (multiprocessing gives it
# /dev/null): what the program binds at import time (from sys import stdin) is this one.
empty = os.open(os.devnull, os.O_RDONLY)
os.dup2(empty, 0)
os.close(empty)
sys.stdin = open(0, closefd=False)
sys.argv = payload["argv"]
sys.setrecursionlimit(50000)
try:
    sys.set_int_max_str_digits(50000)
except AttributeError:
    pass

# What lcb_runner's reliability_guard takes away before the program runs.
builtins.quit = None
builtins.help = None
os.environ["OMP_NUM_THREADS"] = "1"
for name in payload["guard"]["os"]:
    setattr(os, name, None)
import shutil, subprocess
for name in payload["guard"]["shutil"]:
    setattr(shutil, name, None)
subprocess.Popen = None
for name in payload["guard"]["modules"]:
    sys.modules[name] = None


# Raised by SIGALRM at the per-test timeout, and again every second after it, so a program
# that swallows it once does not run on.
class TestTimeout(BaseException):
    pass


def on_alarm(signum, frame):
    raise TestTimeout()


signal.signal(signal.SIGALRM, on_alarm)
timeout = float(payload["timeout"])


def finish(passed, total, error=None, **details):
    report.write(json.dumps({"passed": passed, "total": total, "error": error, "details": details}))
    report.flush()
    os._exit(0)


def short(value, length=200):
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= length else text[: length // 2] + "...(truncated)..." + text[-length // 2:]


def lines(text):
    return [line.strip() for line in text.strip().split("\n")]


def decimals(line):
    try:
        return [Decimal(item) for item in line.split()]
    except (InvalidOperation, ValueError):
        return None


def same_output(got, expected):
    got_lines, expected_lines = lines(got), lines(expected)
    if len(got_lines) != len(expected_lines):
        return False
    for a, b in zip(got_lines, expected_lines):
        if a == b:
            continue
        da, db = decimals(a), decimals(b)
        if da is None or db is None or da != db:
            return False
    return True


def load(source, total):
    # The program's module (not __main__), its top level run under the timeout.
    module = types.ModuleType("solution")
    signal.setitimer(signal.ITIMER_REAL, timeout, 1.0)
    try:
        exec(compile(source, "<solution>", "exec"), module.__dict__)
    except TestTimeout:
        finish(0, total, "Time Limit Exceeded", stage="compile")
    except SyntaxError as exc:
        finish(0, total, "Compilation Error", message=short(repr(exc)))
    except BaseException as exc:
        finish(0, total, "Runtime Error", stage="compile", message=short(repr(exc)))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return module


def as_function(code, prelude):
    # lcb_runner's stdin form: a last `if __name__ == '__main__':` is replaced by its body, the
    # top-level imports run once after the prelude, everything else becomes one function's body.
    tree = ast.parse(code)
    body = tree.body
    last = body[-1] if body else None
    if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
        body = body[:-1] + last.body
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
    rest = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    function = ast.FunctionDef(
        name="program",
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=rest,
        decorator_list=[],
        returns=None,
        type_comment=None,
        lineno=1,
    )
    return prelude + "\n" + ast.unparse(ast.Module(imports, [])) + "\n" + ast.unparse(function)


class StdinBuffer:
    def __init__(self, text):
        self.data = text.encode("utf-8")

    def read(self, *args):
        return self.data

    def readline(self, *args):
        return self.data.split(b"\n")[0] + b"\n"


class Stdin:
    # sys.stdin during a test, as lcb_runner's mock: read() and readlines() give the whole input,
    # readline() reads on; no iteration (it is not a file).
    def __init__(self, text):
        self.text = text
        self.stream = io.StringIO(text)
        self.buffer = StdinBuffer(text)

    def read(self, *args):
        return self.text

    def readline(self, *args):
        return self.stream.readline(*args)

    def readlines(self, *args):
        return self.text.split("\n")

    def __getattr__(self, name):
        return getattr(self.stream, name)


class Capture(io.StringIO):
    pass


code, inputs, outputs, fn_name = payload["code"], payload["inputs"], payload["outputs"], payload["fn_name"]
total = len(inputs)
prelude = payload["prelude"]

if fn_name:
    source = prelude + "\n\n" + code
    module = load(source, total)
    try:
        owner = module.Solution() if "class Solution" in source else module
        method = getattr(owner, fn_name)
    except BaseException as exc:
        finish(0, total, "Runtime Error", stage="compile", message=short(repr(exc)))
    for index, (raw_in, raw_out) in enumerate(zip(inputs, outputs)):
        try:
            args = [json.loads(line) for line in raw_in.split("\n")]
            expected = json.loads(raw_out)
        except ValueError as exc:
            finish(index, total, "Runtime Error", test=index, message="test not JSON: " + short(repr(exc)))
        sys.stdout = io.StringIO()
        signal.setitimer(signal.ITIMER_REAL, timeout, 1.0)
        try:
            got = method(*args)
            signal.setitimer(signal.ITIMER_REAL, 0)
        except TestTimeout:
            finish(index, total, "Time Limit Exceeded", test=index)
        except BaseException as exc:
            signal.setitimer(signal.ITIMER_REAL, 0)
            finish(index, total, "Runtime Error", test=index, message=short(repr(exc)))
        if isinstance(got, tuple):
            got = list(got)
        try:
            equal = bool(got == expected)
        except BaseException:
            equal = False
        if not equal:
            finish(index, total, "Wrong Answer", test=index, got=short(got), expected=short(raw_out))
    finish(total, total)

try:
    source = as_function(code, prelude)
except BaseException as exc:  # ast.parse: SyntaxError, and ValueError for a null byte
    finish(0, total, "Compilation Error", message=short(repr(exc)))
from unittest.mock import mock_open

process_stdin = sys.stdin
program = load(source, total).program
real_open = builtins.open
for index, (raw_in, raw_out) in enumerate(zip(inputs, outputs)):
    # As lcb_runner's patches, in their order: read/readlines/readline of the process's own
    # stdin object first (so `from sys import stdin` reads the test input; readline gives the
    # lines without their newline and StopIteration after the last), then sys.stdin, then
    # builtins.open (the program's own `open` is the prelude's, bound to the real one).
    line_iter = iter(raw_in.split("\n"))
    process_stdin.read = lambda *args, _text=raw_in: _text
    process_stdin.readlines = lambda *args, _text=raw_in: _text.split("\n")
    process_stdin.readline = lambda *args, _lines=line_iter: next(_lines)
    sys.stdin = Stdin(raw_in)
    builtins.open = mock_open(read_data=raw_in)
    captured = sys.stdout = Capture()
    captured.close = lambda x: 1
    signal.setitimer(signal.ITIMER_REAL, timeout, 1.0)
    try:
        program()
    except SystemExit:
        pass
    except TestTimeout:
        finish(index, total, "Time Limit Exceeded", test=index)
    except BaseException as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        finish(index, total, "Runtime Error", test=index, message=short(repr(exc)))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout = sys.__stdout__
        sys.stdin = process_stdin
        builtins.open = real_open
        for name in ("read", "readlines", "readline"):
            process_stdin.__dict__.pop(name, None)
    got = captured.getvalue()
    if not same_output(got, raw_out):
        finish(index, total, "Wrong Answer", test=index, got=short(got), expected=short(raw_out))
finish(total, total)
"""


def item_limits(tests: int, timeout_s: float = PER_TEST_TIMEOUT_S, memory_bytes: int = ITEM_MEMORY_BYTES) -> Limits:
    """The sandbox limits of one item: lcb_runner's global bound (timeout + 1) x tests + 5 s
    on the wall clock and, as the whole item is one process, on its CPU time."""
    wall = (timeout_s + 1) * tests + 5
    return Limits(
        cpu_seconds=int(wall) + 1,
        wall_seconds=wall,
        memory_bytes=memory_bytes,
        file_size_bytes=16 << 20,
        processes=32,
        open_files=64,
        output_bytes=1 << 20,
    )


def grade(
    code: str | None,
    tests: TestSuite,
    *,
    timeout_s: float = PER_TEST_TIMEOUT_S,
    memory_bytes: int = ITEM_MEMORY_BYTES,
    isolation: str = "auto",
    allow_unsandboxed: bool = False,
) -> Verdict:
    """Run ``code`` against every test of ``tests`` in one sandboxed process (``isolation`` and
    ``allow_unsandboxed``: :func:`.sandbox.run_python`'s)."""
    if not code:
        return Verdict(False, "no code extracted from the output", 0, len(tests))
    payload = json.dumps(
        {
            "code": code,
            "inputs": tests.inputs,
            "outputs": tests.outputs,
            "fn_name": tests.fn_name,
            "timeout": timeout_s,
            "prelude": PRELUDE,
            "guard": _GUARD,
            "argv": _ARGV,
        }
    )
    result = run_python(
        _HARNESS,
        payload,
        item_limits(len(tests), timeout_s, memory_bytes),
        isolation=isolation,  # type: ignore[arg-type]
        allow_unsandboxed=allow_unsandboxed,
    )
    try:
        report = json.loads(result.stdout)
    except (json.JSONDecodeError, UnicodeDecodeError):
        why = result.killed or f"exit status {result.returncode}"
        tail = result.stderr[-300:].decode(errors="replace")
        return Verdict(
            False, f"the test process ended without a verdict ({why}): {tail}", 0, len(tests), {}, result.isolation
        )
    passed = report["error"] is None and report["passed"] == report["total"] == len(tests)
    reason = "all tests passed" if passed else f"{report['error']} after {report['passed']}/{report['total']} tests"
    details = report.get("details") or {}
    return Verdict(passed, reason, int(report["passed"]), int(report["total"]), details, result.isolation)


def _grade_item(args: tuple[str | None, TestSuite, float, int, str, bool]) -> Verdict:
    code, tests, timeout_s, memory_bytes, isolation, allow_unsandboxed = args
    return grade(
        code,
        tests,
        timeout_s=timeout_s,
        memory_bytes=memory_bytes,
        isolation=isolation,
        allow_unsandboxed=allow_unsandboxed,
    )


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def pool_size(memory_bytes: int = ITEM_MEMORY_BYTES, requested: int | None = None) -> int:
    """Parallel items: the cores, fewer when the available memory cannot hold that many items at
    their memory limit (never below one), and at most ``requested``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    available = _available_memory()
    by_memory = max(1, available // memory_bytes) if available else cores
    size = max(1, min(cores, by_memory))
    return min(size, requested) if requested else size


def grade_many(
    items: Sequence[tuple[str | None, TestSuite]],
    *,
    workers: int | None = None,
    timeout_s: float = PER_TEST_TIMEOUT_S,
    memory_bytes: int = ITEM_MEMORY_BYTES,
    isolation: str = "auto",
    allow_unsandboxed: bool = False,
) -> list[Verdict]:
    """Grade ``(code, tests)`` items, at most ``pool_size`` sandboxes at a time; verdicts in
    input order.

    The work happens in the sandbox processes, so the pool is of threads that each start one
    sandbox and wait on its pipes. A process pool would add nothing but its hazards: spawn and
    forkserver workers re-import the main module (a Snakemake script without a ``__main__``
    guard would run again), fork workers copy whatever threads the evaluator holds. The
    sandbox's child setup only makes system calls through functions loaded beforehand, no
    imports or locks, which is what makes starting it from a thread safe."""
    if not items:
        return []
    size = pool_size(memory_bytes, workers)
    if isolation == "auto":
        # Chosen once (and refused once, with its reasons) rather than per item.
        isolation = best_isolation(allow_unsandboxed=allow_unsandboxed)
    work = [(code, tests, timeout_s, memory_bytes, isolation, allow_unsandboxed) for code, tests in items]
    if size == 1 or len(items) == 1:
        return [_grade_item(item) for item in work]
    with ThreadPoolExecutor(max_workers=min(size, len(items)), thread_name_prefix="lcb-sandbox") as pool:
        return list(pool.map(_grade_item, work))
