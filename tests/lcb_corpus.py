# ruff: noqa: E501  (the corpus programs are one string each)
"""A corpus of model-shaped LiveCodeBench answers (all written for this project), to score with
our scorer and with the reference (bench/accuracy_reference.py) side by side.

Each entry: an ``id``, a ``problem`` in LiveCodeBench's column form (``public_test_cases`` and
``private_test_cases`` as JSON texts of ``{"input", "output", "testtype"}``, ``metadata`` with
``func_name`` for call-based items) and the decoded model ``output`` (harmony-shaped text as the
accuracy log decodes it with ``skip_special_tokens=False``). The entries are built by
:func:`corpus` deterministically; ``tests/data/lcb_reference_corpus.json`` records, per id, the
reference's verdict (``--record``), which tests/test_accuracy_lcb_reference.py checks ours against.

The corpus covers: extraction (final channel or not, several blocks, ```python3 / ```py /
```Python tags, plain blocks, no block, corrupted markers, an empty block), stdin reading styles
(input(), sys.stdin.readline / read / readlines / buffer, ``from sys import stdin``, open(0),
iterating sys.stdin, blank lines, input without a final newline), output comparison (trailing
blanks and newlines, float and exponent forms, 0.1 + 0.2, -0, extra or missing lines, case),
SystemExit / exit() / quit(), exceptions, compile errors, timeouts (a few; the bench and the
test run with a 2 s per-test timeout), recursion, threads, large output, ``__main__`` guards,
``global`` in nested functions, ``from __future__``, and call-based items (``class Solution``
methods, module-level functions, tuple/list/float/bool results).
"""

from __future__ import annotations

import json
from typing import Any

#: Per-test timeout (seconds) the corpus is scored with, by the bench and by the test.
TIMEOUT_S = 2


def _tests(pairs: list[tuple[str, str]], testtype: str) -> str:
    return json.dumps([{"input": i, "output": o, "testtype": testtype} for i, o in pairs])


def _problem(public: list[tuple[str, str]], private: list[tuple[str, str]], fn_name: str | None = None):
    testtype = "functional" if fn_name else "stdin"
    return {
        "public_test_cases": _tests(public, testtype),
        "private_test_cases": _tests(private, testtype),
        "metadata": json.dumps({"func_name": fn_name} if fn_name else {}),
    }


def _fib_mod(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % 1_000_000_007
    return a


# --- problems -------------------------------------------------------------------------------

PROBLEMS: dict[str, dict[str, Any]] = {
    # a b -> a + b
    "add": _problem([("1 2\n", "3\n"), ("10 -4\n", "6\n")], [("1000000000 1000000000\n", "2000000000\n")]),
    # n, then n integers -> their sum
    "sum": _problem([("3\n1 2 3\n", "6\n")], [("1\n-5\n", "-5\n"), ("5\n10 20 30 40 50\n", "150\n")]),
    # n, then n integers -> their mean
    "mean": _problem([("2\n2 3\n", "2.5\n")], [("3\n1 2 3\n", "2.0\n"), ("4\n1 1 1 2\n", "1.25\n")]),
    # two decimals -> their sum, expected to 1e-9 in the statement (but compared as LiveCodeBench does)
    "fsum": _problem([("0.1 0.2\n", "0.3\n")], [("1.5 2.5\n", "4.0\n")]),
    # words on lines until EOF -> each line upper-cased (the last test has no final newline)
    "upper": _problem([("ab\ncd\n", "AB\nCD\n")], [("x\n", "X\n"), ("hello world\nfoo", "HELLO WORLD\nFOO\n")]),
    # n, a blank line, then n integers one per line -> their maximum
    "blankmax": _problem([("3\n\n4\n9\n2\n", "9\n")], [("1\n\n-7\n", "-7\n")]),
    # n -> Yes if n is even else No
    "parity": _problem([("4\n", "Yes\n"), ("7\n", "No\n")], [("0\n", "Yes\n")]),
    # n -> 1..n, one per line
    "count": _problem([("3\n", "1\n2\n3\n")], [("100000\n", "".join(f"{i}\n" for i in range(1, 100001)))]),
    # n -> fib(n) mod 1e9+7 (n up to 3000: a recursive solution needs the raised recursion limit)
    # n, then n integers -> the values sorted, space-separated
    "sort": _problem([("4\n3 1 2 1\n", "1 1 2 3\n")], [("1\n5\n", "5\n"), ("3\n-1 -3 -2\n", "-3 -2 -1\n")]),
    # call-based: indices of the two numbers adding up to target
    "twosum": _problem(
        [("[2, 7, 11, 15]\n9", "[0, 1]"), ("[3, 2, 4]\n6", "[1, 2]")], [("[3, 3]\n6", "[0, 1]")], "twoSum"
    ),
    # call-based, module-level function: a + b
    "addtwo": _problem([("1\n2", "3"), ("-5\n5", "0")], [("100\n23", "123")], "addTwo"),
    # call-based: average of a list (float result)
    "average": _problem([("[1, 2]", "1.5"), ("[2, 2]", "2.0")], [("[0.1, 0.2]", "0.15000000000000002")], "average"),
    # call-based: is s a palindrome (bool result)
    "ispal": _problem([('"abba"', "true"), ('"abc"', "false")], [('""', "true")], "isPalindrome"),
    # call-based: pairs (i, i+1) for i in range(n) -> list of lists
    "pairs": _problem([("2", "[[0, 1], [1, 2]]")], [("0", "[]")], "makePairs"),
    # call-based: the string reversed
    "rev": _problem([('"abc"', '"cba"')], [('"x"', '"x"'), ('""', '""')], "reverse"),
}


PROBLEMS["fib"] = _problem([("10\n", "55\n")], [("3000\n", f"{_fib_mod(3000)}\n")])


# --- programs: (problem, label, code) --------------------------------------------------------

_ADD_OK = "a, b = map(int, input().split())\nprint(a + b)"
_TWOSUM_OK = (
    "class Solution:\n"
    "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        seen = {}\n"
    "        for i, x in enumerate(nums):\n"
    "            if target - x in seen:\n"
    "                return [seen[target - x], i]\n"
    "            seen[x] = i\n"
    "        return []"
)

PROGRAMS: list[tuple[str, str, str]] = [
    # add: reading styles, output forms, exits, errors
    ("add", "ok", _ADD_OK),
    ("add", "wrong-minus", "a, b = map(int, input().split())\nprint(a - b)"),
    ("add", "trailing-space", "a, b = map(int, input().split())\nprint(a + b, ' ')"),
    ("add", "trailing-newlines", "a, b = map(int, input().split())\nprint(a + b)\nprint()\nprint()"),
    ("add", "leading-newline", "a, b = map(int, input().split())\nprint()\nprint(a + b)"),
    ("add", "float-form", "a, b = map(int, input().split())\nprint(float(a + b))"),
    ("add", "exponent-form", "a, b = map(int, input().split())\nprint(f'{a + b:e}')"),
    ("add", "extra-line", "a, b = map(int, input().split())\nprint(a + b)\nprint('done')"),
    ("add", "debug-first", "a, b = map(int, input().split())\nprint('sum:')\nprint(a + b)"),
    ("add", "no-output", "a, b = map(int, input().split())"),
    ("add", "stderr-only", "import sys\na, b = map(int, input().split())\nprint(a + b, file=sys.stderr)"),
    (
        "add",
        "stderr-debug",
        "import sys\na, b = map(int, input().split())\nprint('dbg', file=sys.stderr)\nprint(a + b)",
    ),
    ("add", "stdout-write", "import sys\na, b = map(int, sys.stdin.readline().split())\nsys.stdout.write(str(a + b))"),
    ("add", "from-sys-stdout", "from sys import stdout\na, b = map(int, input().split())\nstdout.write(f'{a + b}\\n')"),
    ("add", "bound-write", "import sys\nw = sys.stdout.write\na, b = map(int, input().split())\nw(f'{a + b}\\n')"),
    ("add", "from-sys-stdin", "from sys import stdin\na, b = map(int, stdin.readline().split())\nprint(a + b)"),
    ("add", "prelude-stdin", "a, b = map(int, stdin.readline().split())\nprint(a + b)"),
    ("add", "input-alias", "import sys\ninput = sys.stdin.readline\na, b = map(int, input().split())\nprint(a + b)"),
    ("add", "read-split", "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)"),
    ("add", "open0", "a, b = map(int, open(0).read().split())\nprint(a + b)"),
    ("add", "builtins-open0", "import builtins\na, b = map(int, builtins.open(0).read().split())\nprint(a + b)"),
    ("add", "buffer-read", "import sys\na, b = map(int, sys.stdin.buffer.read().split())\nprint(a + b)"),
    ("add", "buffer-readline", "import sys\na, b = map(int, sys.stdin.buffer.readline().split())\nprint(a + b)"),
    ("add", "from-sys-buffer", "from sys import stdin\na, b = map(int, stdin.buffer.read().split())\nprint(a + b)"),
    ("add", "iter-stdin", "import sys\nfor line in sys.stdin:\n    a, b = map(int, line.split())\n    print(a + b)"),
    (
        "add",
        "fileinput",
        "import fileinput\nfor line in fileinput.input():\n    a, b = map(int, line.split())\n    print(a + b)",
    ),
    ("add", "exit-after", _ADD_OK + "\nexit()\nprint('never')"),
    ("add", "sys-exit-after", "import sys\n" + _ADD_OK + "\nsys.exit(0)\nprint('never')"),
    ("add", "sys-exit-1", "import sys\n" + _ADD_OK + "\nsys.exit(1)"),
    ("add", "raise-systemexit", _ADD_OK + "\nraise SystemExit"),
    ("add", "quit-after", _ADD_OK + "\nquit()"),
    ("add", "exit-before", "import sys\nsys.exit()\n" + _ADD_OK),
    ("add", "raise-after", _ADD_OK + "\nraise ValueError('late')"),
    ("add", "raise-before", "raise RuntimeError('no')\n" + _ADD_OK),
    ("add", "syntax-error", "a, b = map(int, input().split()\nprint(a + b)"),
    ("add", "indent-error", "a, b = map(int, input().split())\n  print(a + b)"),
    ("add", "name-error", "a, b = map(int, input().split())\nprint(a + c)"),
    ("add", "zero-div", "a, b = map(int, input().split())\nprint((a + b) // (a - a))"),
    ("add", "missing-module", "import numpy_not_installed\n" + _ADD_OK),
    ("add", "resource-import", "import resource\n" + _ADD_OK),
    ("add", "timeout-loop", "while True:\n    pass"),
    (
        "add",
        "timeout-late",
        "a, b = map(int, input().split())\nif a > 100:\n    while True:\n        pass\nprint(a + b)",
    ),
    (
        "add",
        "main-guard",
        "def main():\n    a, b = map(int, input().split())\n    print(a + b)\n\nif __name__ == '__main__':\n    main()",
    ),
    (
        "add",
        "main-guard-dq",
        'def main():\n    a, b = map(int, input().split())\n    print(a + b)\nif __name__ == "__main__":\n    main()',
    ),
    (
        "add",
        "main-guard-not-last",
        "def main():\n    a, b = map(int, input().split())\n    print(a + b)\nif __name__ == '__main__':\n    main()\nDONE = True",
    ),
    (
        "add",
        "main-guard-reversed",
        "def main():\n    print(sum(map(int, input().split())))\nif '__main__' == __name__:\n    main()",
    ),
    (
        "add",
        "main-guard-else",
        "def main():\n    print(sum(map(int, input().split())))\nif __name__ == '__main__':\n    main()\nelse:\n    main()",
    ),
    (
        "add",
        "global-counter",
        "calls = 0\ndef add(a, b):\n    global calls\n    calls += 1\n    return a + b\na, b = map(int, input().split())\nprint(add(a, b))",
    ),
    (
        "add",
        "global-top",
        "global total\ntotal = 0\ndef add(v):\n    global total\n    total += v\nfor v in map(int, input().split()):\n    add(v)\nprint(total)",
    ),
    (
        "add",
        "closure",
        "K = 0\ndef add(a, b):\n    return a + b + K\na, b = map(int, input().split())\nprint(add(a, b))",
    ),
    ("add", "globals-dict", "a, b = map(int, input().split())\nprint(globals()['a'] + b)"),
    ("add", "future-import", "from __future__ import annotations\n" + _ADD_OK),
    (
        "add",
        "typing-module",
        "xs: typing.List[int] = []\n" + _ADD_OK + "\nprint(typing.List is List) if False else None",
    ),
    ("add", "typing-attr", "T = typing.List\n" + _ADD_OK),
    ("add", "prelude-names", "a, b = map(int, input().split())\nprint(reduce(add, [a, b]) if gcd(1, 1) == 1 else 0)"),
    ("add", "star-in-try", "try:\n    from math import *\nexcept ImportError:\n    pass\n" + _ADD_OK),
    ("add", "class-const", "class C:\n    BIAS = 0\na, b = map(int, input().split())\nprint(a + b + C.BIAS)"),
    (
        "add",
        "lambda-rec",
        "f = lambda x: x if x < 1 else f(x - 1) + 1\na, b = map(int, input().split())\nprint(a + b + f(3) - 3)",
    ),
    ("add", "imports-only", "import sys\nimport math"),
    ("add", "crlf", _ADD_OK.replace("\n", "\r\n")),
    ("add", "os-getcwd", "import os\nos.getcwd()\n" + _ADD_OK),
    (
        "add",
        "tab-separated",
        "a, b = map(int, input().split())\nprint(a + b, a - a, sep='\\t') if False else print(a + b)",
    ),
    ("add", "true-text", "a, b = map(int, input().split())\nprint(a + b > 0)"),
    ("add", "sys-stdout-close", "import sys\n" + _ADD_OK + "\nsys.stdout.close()"),
    ("add", "read-twice", "import sys\nt = sys.stdin.read()\nt2 = sys.stdin.read()\nprint(sum(map(int, t.split())))"),
    ("add", "input-prompt", "a, b = map(int, input('> ').split())\nprint(a + b)"),
    ("add", "print-flush", "a, b = map(int, input().split())\nprint(a + b, flush=True)"),
    (
        "add",
        "exception-swallowed",
        "try:\n    a, b = map(int, input().split())\n    print(a + b)\nexcept Exception:\n    print(0)",
    ),
    # sum: line-based reading
    ("sum", "ok", "n = int(input())\nprint(sum(map(int, input().split())))"),
    ("sum", "read-all", "import sys\nd = sys.stdin.read().split()\nprint(sum(map(int, d[1:])))"),
    (
        "sum",
        "readline",
        "import sys\nn = int(sys.stdin.readline())\nprint(sum(map(int, sys.stdin.readline().split())))",
    ),
    ("sum", "readlines", "import sys\nls = sys.stdin.readlines()\nprint(sum(map(int, ls[1].split())))"),
    (
        "sum",
        "readlines-int-each",
        "import sys\nls = sys.stdin.readlines()\nprint(sum(int(x) for l in ls[1:] for x in l.split()))",
    ),
    ("sum", "readlines-int-all", "import sys\nt = 0\nfor l in sys.stdin.readlines()[1:]:\n    t += int(l)\nprint(t)"),
    ("sum", "wrong-first-only", "n = int(input())\nprint(int(input().split()[0]))"),
    ("sum", "off-by-one", "n = int(input())\nprint(sum(map(int, input().split())) + 1)"),
    (
        "sum",
        "stdin-readline-alias",
        "from sys import stdin\ninput = stdin.readline\nn = int(input())\nprint(sum(map(int, input().split())))",
    ),
    (
        "sum",
        "readline-strip-newline",
        "import sys\nn = int(sys.stdin.readline()[:-1])\nprint(sum(map(int, sys.stdin.readline()[:-1].split())))",
    ),
    (
        "sum",
        "from-stdin-readline-chop",
        "from sys import stdin\nn = int(stdin.readline()[:-1])\nprint(sum(map(int, stdin.readline().split())))",
    ),
    (
        "sum",
        "func-main",
        "def solve():\n    n = int(input())\n    return sum(map(int, input().split()))\nprint(solve())",
    ),
    ("sum", "map-print-star", "n = int(input())\nxs = list(map(int, input().split()))\nprint(*[sum(xs)])"),
    ("sum", "too-many-reads", "n = int(input())\nxs = input()\nextra = input()\nprint(sum(map(int, xs.split())))"),
    (
        "sum",
        "eof-loop",
        "xs = []\nwhile True:\n    try:\n        xs.append(input())\n    except EOFError:\n        break\nprint(sum(map(int, xs[1].split())))",
    ),
    (
        "sum",
        "iter-readline",
        "import sys\nls = list(iter(sys.stdin.readline, ''))\nprint(sum(map(int, ls[1].split())))",
    ),
    # mean: float formatting
    ("mean", "ok", "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) / n)"),
    ("mean", "fixed-10", "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:.10f}')"),
    ("mean", "fixed-2", "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:.2f}')"),
    ("mean", "fixed-1", "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:.1f}')"),
    ("mean", "exponent", "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:e}')"),
    ("mean", "exponent-E", "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:E}')"),
    ("mean", "general", "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:g}')"),
    ("mean", "int-div", "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) // n)"),
    (
        "mean",
        "fraction",
        "from fractions import Fraction\nn = int(input())\nxs = list(map(int, input().split()))\nprint(Fraction(sum(xs), n))",
    ),
    (
        "mean",
        "decimal",
        "from decimal import Decimal\nn = int(input())\nxs = list(map(int, input().split()))\nprint(Decimal(sum(xs)) / n)",
    ),
    (
        "mean",
        "comma",
        "n = int(input())\nxs = list(map(int, input().split()))\nprint(str(sum(xs) / n).replace('.', ','))",
    ),
    ("mean", "plus-sign", "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:+}')"),
    ("mean", "padded", "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:>12}')"),
    ("mean", "round-4", "n = int(input())\nxs = list(map(int, input().split()))\nprint(round(sum(xs) / n, 4))"),
    ("mean", "statistics", "n = int(input())\nprint(float(mean(map(int, input().split()))))"),
    # fsum: 0.1 + 0.2
    ("fsum", "naive", "a, b = map(float, input().split())\nprint(a + b)"),
    ("fsum", "rounded", "a, b = map(float, input().split())\nprint(round(a + b, 10))"),
    ("fsum", "fixed-9", "a, b = map(float, input().split())\nprint(f'{a + b:.9f}')"),
    ("fsum", "decimal", "from decimal import Decimal\na, b = map(Decimal, input().split())\nprint(a + b)"),
    ("fsum", "repr-1e", "a, b = map(float, input().split())\nprint(f'{a + b:.1e}')"),
    (
        "fsum",
        "trailing-zeros",
        "from decimal import Decimal\na, b = map(Decimal, input().split())\nprint(f'{a + b:.5f}')",
    ),
    # upper: EOF-driven reading
    ("upper", "read-splitlines", "import sys\nfor l in sys.stdin.read().splitlines():\n    print(l.upper())"),
    ("upper", "read-split-words", "import sys\nfor w in sys.stdin.read().split():\n    print(w.upper())"),
    ("upper", "iter-stdin", "import sys\nfor l in sys.stdin:\n    print(l.strip().upper())"),
    ("upper", "iter-from-stdin", "from sys import stdin\nfor l in stdin:\n    print(l.strip().upper())"),
    (
        "upper",
        "eof-input",
        "while True:\n    try:\n        l = input()\n    except EOFError:\n        break\n    print(l.upper())",
    ),
    (
        "upper",
        "readline-loop",
        "import sys\nwhile True:\n    l = sys.stdin.readline()\n    if not l:\n        break\n    print(l.strip().upper())",
    ),
    (
        "upper",
        "readline-chop",
        "import sys\nwhile True:\n    l = sys.stdin.readline()\n    if not l:\n        break\n    print(l[:-1].upper())",
    ),
    (
        "upper",
        "from-readline-loop",
        "from sys import stdin\nwhile True:\n    l = stdin.readline()\n    if not l:\n        break\n    print(l.upper())",
    ),
    ("upper", "readlines", "import sys\nfor l in sys.stdin.readlines():\n    print(l.strip().upper())"),
    ("upper", "from-readlines", "from sys import stdin\nfor l in stdin.readlines():\n    print(l.upper())"),
    ("upper", "open0-lines", "for l in open(0):\n    print(l.strip().upper())"),
    ("upper", "open0-read", "print(open(0).read().upper())"),
    ("upper", "read-upper", "import sys\nprint(sys.stdin.read().upper())"),
    ("upper", "from-read-upper", "from sys import stdin\nprint(stdin.read().upper())"),
    (
        "upper",
        "buffer-lines",
        "import sys\nfor l in sys.stdin.buffer.read().decode().split('\\n'):\n    print(l.upper())",
    ),
    ("upper", "lower-wrong", "import sys\nprint(sys.stdin.read())"),
    ("upper", "title-wrong", "import sys\nprint(sys.stdin.read().title())"),
    ("upper", "one-line-only", "print(input().upper())"),
    # blankmax: a blank line in the input
    ("blankmax", "input-lines", "n = int(input())\ninput()\nprint(max(int(input()) for _ in range(n)))"),
    ("blankmax", "read-split", "import sys\nd = sys.stdin.read().split()\nprint(max(map(int, d[1:])))"),
    ("blankmax", "skip-blank-wrong", "n = int(input())\nprint(max(int(input()) for _ in range(n)))"),
    (
        "blankmax",
        "readline-loop",
        "import sys\nn = int(sys.stdin.readline())\nsys.stdin.readline()\nprint(max(int(sys.stdin.readline()) for _ in range(n)))",
    ),
    (
        "blankmax",
        "from-readline",
        "from sys import stdin\nn = int(stdin.readline())\nstdin.readline()\nprint(max(int(stdin.readline()) for _ in range(n)))",
    ),
    (
        "blankmax",
        "iter-until-blank",
        "import sys\nls = list(iter(sys.stdin.readline, ''))\nprint(max(int(l) for l in ls[2:]))",
    ),
    (
        "blankmax",
        "readlines-filter",
        "import sys\nls = [l for l in sys.stdin.readlines() if l.strip()]\nprint(max(map(int, ls[1:])))",
    ),
    # parity: case and wording
    ("parity", "ok", "print('Yes' if int(input()) % 2 == 0 else 'No')"),
    ("parity", "upper", "print('YES' if int(input()) % 2 == 0 else 'NO')"),
    ("parity", "swapped", "print('No' if int(input()) % 2 == 0 else 'Yes')"),
    ("parity", "quoted", "print(repr('Yes' if int(input()) % 2 == 0 else 'No'))"),
    ("parity", "spaces-inside", "print(' Yes ' if int(input()) % 2 == 0 else ' No ')"),
    ("parity", "bool", "print(int(input()) % 2 == 0)"),
    (
        "parity",
        "exit-early",
        "import sys\nn = int(input())\nif n % 2 == 0:\n    print('Yes')\n    sys.exit()\nprint('No')",
    ),
    ("parity", "quit-early", "n = int(input())\nif n % 2 == 0:\n    print('Yes')\n    quit()\nprint('No')"),
    ("parity", "exit-call", "n = int(input())\nif n % 2 == 0:\n    print('Yes')\n    exit(0)\nprint('No')"),
    ("parity", "os-exit", "import os\nn = int(input())\nprint('Yes' if n % 2 == 0 else 'No')\nos._exit(0)"),
    # count: large output
    ("count", "ok", "n = int(input())\nprint('\\n'.join(map(str, range(1, n + 1))))"),
    ("count", "loop-print", "n = int(input())\nfor i in range(1, n + 1):\n    print(i)"),
    ("count", "print-star-sep", "n = int(input())\nprint(*range(1, n + 1), sep='\\n')"),
    ("count", "trailing-space-lines", "n = int(input())\nprint('\\n'.join(f'{i} ' for i in range(1, n + 1)))"),
    ("count", "one-line", "n = int(input())\nprint(*range(1, n + 1))"),
    ("count", "stop-short", "n = int(input())\nprint('\\n'.join(map(str, range(1, n))))"),
    ("count", "float-lines", "n = int(input())\nprint('\\n'.join(f'{i}.0' for i in range(1, n + 1)))"),
    (
        "count",
        "write-join",
        "import sys\nn = int(input())\nsys.stdout.write('\\n'.join(map(str, range(1, n + 1))) + '\\n')",
    ),
    # fib: recursion
    (
        "fib",
        "memo-rec",
        "from functools import lru_cache\nimport sys\nsys.setrecursionlimit(10000)\n"
        "@lru_cache(None)\ndef f(n):\n    return n if n < 2 else (f(n - 1) + f(n - 2)) % 1000000007\nprint(f(int(input())))",
    ),
    ("fib", "iter", "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, (a + b) % 1000000007\nprint(a)"),
    ("fib", "no-mod", "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)"),
    (
        "fib",
        "slow-rec",
        "def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\nprint(f(int(input())) % 1000000007)",
    ),
    (
        "fib",
        "memo-dict",
        "memo = {0: 0, 1: 1}\ndef f(n):\n    if n not in memo:\n        memo[n] = (f(n - 1) + f(n - 2)) % 1000000007\n    return memo[n]\nprint(f(int(input())))",
    ),
    (
        "fib",
        "thread-stack",
        "import sys, threading\nsys.setrecursionlimit(100000)\nthreading.stack_size(1 << 26)\n"
        "def main():\n    memo = {}\n    def f(n):\n        if n < 2:\n            return n\n        if n not in memo:\n"
        "            memo[n] = (f(n - 1) + f(n - 2)) % 1000000007\n        return memo[n]\n    print(f(int(input())))\n"
        "t = threading.Thread(target=main)\nt.start()\nt.join()",
    ),
    # sort: separators
    ("sort", "ok", "n = int(input())\nprint(*sorted(map(int, input().split())))"),
    ("sort", "join", "n = int(input())\nprint(' '.join(map(str, sorted(map(int, input().split())))))"),
    ("sort", "list-repr", "n = int(input())\nprint(sorted(map(int, input().split())))"),
    ("sort", "comma", "n = int(input())\nprint(','.join(map(str, sorted(map(int, input().split())))))"),
    ("sort", "double-space", "n = int(input())\nprint('  '.join(map(str, sorted(map(int, input().split())))))"),
    ("sort", "one-per-line", "n = int(input())\nprint(*sorted(map(int, input().split())), sep='\\n')"),
    ("sort", "desc", "n = int(input())\nprint(*sorted(map(int, input().split()), reverse=True))"),
    ("sort", "string-sort", "n = int(input())\nprint(*sorted(input().split()))"),
    ("sort", "tab", "n = int(input())\nprint(*sorted(map(int, input().split())), sep='\\t')"),
    ("sort", "floats", "n = int(input())\nprint(*[float(x) for x in sorted(map(int, input().split()))])"),
    # twosum: call-based with class Solution
    ("twosum", "ok", _TWOSUM_OK),
    ("twosum", "tuple", _TWOSUM_OK.replace("return [seen[target - x], i]", "return seen[target - x], i")),
    ("twosum", "swapped", _TWOSUM_OK.replace("return [seen[target - x], i]", "return [i, seen[target - x]]")),
    ("twosum", "set-result", _TWOSUM_OK.replace("return [seen[target - x], i]", "return {seen[target - x], i}")),
    ("twosum", "typing-import", "from typing import List\n" + _TWOSUM_OK),
    ("twosum", "typing-module", _TWOSUM_OK.replace("List[int]", "typing.List[int]")),
    ("twosum", "future", "from __future__ import annotations\n" + _TWOSUM_OK),
    (
        "twosum",
        "main-guard-input",
        _TWOSUM_OK + "\n\nif __name__ == '__main__':\n    print(Solution().twoSum(eval(input()), int(input())))",
    ),
    (
        "twosum",
        "main-guard-print",
        _TWOSUM_OK + "\n\nif __name__ == '__main__':\n    print(Solution().twoSum([2, 7], 9))",
    ),
    ("twosum", "module-test-print", _TWOSUM_OK + "\n\nprint(Solution().twoSum([2, 7], 9))"),
    ("twosum", "module-input", _TWOSUM_OK + "\n\nnums = input()"),
    (
        "twosum",
        "helper-outside",
        "def find(nums, t):\n    for i in range(len(nums)):\n        for j in range(i + 1, len(nums)):\n            if nums[i] + nums[j] == t:\n                return [i, j]\nclass Solution:\n    def twoSum(self, nums, target):\n        return find(nums, target)",
    ),
    (
        "twosum",
        "brute",
        "class Solution:\n    def twoSum(self, nums, target):\n        for i in range(len(nums)):\n            for j in range(i + 1, len(nums)):\n                if nums[i] + nums[j] == target:\n                    return [i, j]",
    ),
    ("twosum", "wrong-name", _TWOSUM_OK.replace("def twoSum", "def two_sum")),
    (
        "twosum",
        "init-args",
        _TWOSUM_OK.replace("class Solution:\n", "class Solution:\n    def __init__(self, k):\n        self.k = k\n"),
    ),
    ("twosum", "raises", "class Solution:\n    def twoSum(self, nums, target):\n        raise NotImplementedError"),
    ("twosum", "sys-exit", "import sys\nclass Solution:\n    def twoSum(self, nums, target):\n        sys.exit(0)"),
    ("twosum", "exit-at-import", _TWOSUM_OK + "\nexit()"),
    (
        "twosum",
        "timeout",
        "class Solution:\n    def twoSum(self, nums, target):\n        while True:\n            pass",
    ),
    (
        "twosum",
        "prints-too",
        _TWOSUM_OK.replace("        seen = {}\n", "        seen = {}\n        print('debug', nums)\n"),
    ),
    ("twosum", "none", "class Solution:\n    def twoSum(self, nums, target):\n        pass"),
    ("twosum", "syntax", "class Solution:\n    def twoSum(self, nums, target)\n        return [0, 1]"),
    ("twosum", "solution-in-comment", "# class Solution would go here\ndef twoSum(nums, target):\n    return [0, 1]"),
    (
        "twosum",
        "module-level",
        "def twoSum(nums, target):\n    seen = {}\n    for i, x in enumerate(nums):\n        if target - x in seen:\n            return [seen[target - x], i]\n        seen[x] = i",
    ),
    (
        "twosum",
        "state-across-tests",
        "class Solution:\n    calls = []\n    def twoSum(self, nums, target):\n        self.calls.append(1)\n        if len(self.calls) > 2:\n            return []\n        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n            seen[x] = i",
    ),
    (
        "twosum",
        "numpy-free-array",
        "import array\nclass Solution:\n    def twoSum(self, nums, target):\n        for i in range(len(nums)):\n            for j in range(i + 1, len(nums)):\n                if nums[i] + nums[j] == target:\n                    return array.array('i', [i, j])",
    ),
    # addtwo: module-level function
    ("addtwo", "ok", "def addTwo(a, b):\n    return a + b"),
    ("addtwo", "class", "class Solution:\n    def addTwo(self, a, b):\n        return a + b"),
    ("addtwo", "float-result", "def addTwo(a, b):\n    return float(a + b)"),
    ("addtwo", "str-result", "def addTwo(a, b):\n    return str(a + b)"),
    ("addtwo", "bool-when-one", "def addTwo(a, b):\n    return True if a + b == 1 else a + b"),
    ("addtwo", "tuple-result", "def addTwo(a, b):\n    return (a + b,)"),
    ("addtwo", "lambda", "addTwo = lambda a, b: a + b"),
    ("addtwo", "varargs", "def addTwo(*xs):\n    return sum(xs)"),
    ("addtwo", "one-arg", "def addTwo(a):\n    return a"),
    ("addtwo", "exit-call", "def addTwo(a, b):\n    exit()"),
    ("addtwo", "quit-in-body", "def addTwo(a, b):\n    if a > 1000:\n        quit()\n    return a + b"),
    ("addtwo", "sleep", "import time\ndef addTwo(a, b):\n    time.sleep(30)\n    return a + b"),
    (
        "addtwo",
        "main-guard",
        "def addTwo(a, b):\n    return a + b\nif __name__ == '__main__':\n    import sys\n    a = int(sys.stdin.readline())\n    print(addTwo(a, 1))",
    ),
    ("addtwo", "prelude-add", "def addTwo(a, b):\n    return add(a, b)"),
    # average: float results
    ("average", "ok", "def average(nums):\n    return sum(nums) / len(nums)"),
    ("average", "statistics", "def average(nums):\n    return mean(nums)"),
    ("average", "fsum", "import math\ndef average(nums):\n    return math.fsum(nums) / len(nums)"),
    ("average", "rounded", "def average(nums):\n    return round(sum(nums) / len(nums), 6)"),
    ("average", "int-div", "def average(nums):\n    return sum(nums) // len(nums)"),
    (
        "average",
        "decimal",
        "from decimal import Decimal\ndef average(nums):\n    return Decimal(sum(nums)) / len(nums)",
    ),
    (
        "average",
        "fraction",
        "from fractions import Fraction\ndef average(nums):\n    return Fraction(sum(nums)) / len(nums)",
    ),
    ("average", "str", "def average(nums):\n    return str(sum(nums) / len(nums))"),
    # ispal: bools
    ("ispal", "ok", "class Solution:\n    def isPalindrome(self, s: str) -> bool:\n        return s == s[::-1]"),
    ("ispal", "int", "class Solution:\n    def isPalindrome(self, s):\n        return int(s == s[::-1])"),
    ("ispal", "str", "class Solution:\n    def isPalindrome(self, s):\n        return str(s == s[::-1]).lower()"),
    (
        "ispal",
        "none-false",
        "class Solution:\n    def isPalindrome(self, s):\n        return True if s == s[::-1] else None",
    ),
    (
        "ispal",
        "empty-wrong",
        "class Solution:\n    def isPalindrome(self, s):\n        return bool(s) and s == s[::-1]",
    ),
    (
        "ispal",
        "recursive",
        "class Solution:\n    def isPalindrome(self, s):\n        if len(s) < 2:\n            return True\n        return s[0] == s[-1] and self.isPalindrome(s[1:-1])",
    ),
    # pairs: nested sequences
    ("pairs", "ok", "def makePairs(n):\n    return [[i, i + 1] for i in range(n)]"),
    ("pairs", "tuples-inside", "def makePairs(n):\n    return [(i, i + 1) for i in range(n)]"),
    ("pairs", "tuple-of-lists", "def makePairs(n):\n    return tuple([i, i + 1] for i in range(n))"),
    ("pairs", "generator", "def makePairs(n):\n    return ([i, i + 1] for i in range(n))"),
    ("pairs", "zip", "def makePairs(n):\n    return list(map(list, zip(range(n), range(1, n + 1))))"),
    # rev: strings
    ("rev", "ok", "class Solution:\n    def reverse(self, s):\n        return s[::-1]"),
    ("rev", "join", "class Solution:\n    def reverse(self, s):\n        return ''.join(reversed(s))"),
    ("rev", "list", "class Solution:\n    def reverse(self, s):\n        return list(reversed(s))"),
    ("rev", "strip", "class Solution:\n    def reverse(self, s):\n        return s[::-1] + ' '"),
    ("rev", "bytes", "class Solution:\n    def reverse(self, s):\n        return s[::-1].encode()"),
]


# --- output shapes (extraction) ---------------------------------------------------------------

_ANALYSIS = "<|channel|>analysis<|message|>We need to read the input and print the answer. Let's write it.<|end|>"


def harmony(code: str, tag: str = "python", *, final_return: bool = True) -> str:
    """The usual shape: an analysis message, then the final channel with one fenced block."""
    end = "<|return|>" if final_return else ""
    return (
        f"{_ANALYSIS}<|start|>assistant<|channel|>final<|message|>Here is the solution.\n\n"
        f"```{tag}\n{code}\n```\n\nIt runs in O(n).{end}"
    )


def _shapes(code: str, wrong: str) -> list[tuple[str, str]]:
    """(label, output) variants of where and how the program appears; ``wrong`` is a program
    that fails the same problem (for the several-blocks cases)."""
    a = "<|channel|>analysis<|message|>"
    f = "<|end|><|start|>assistant<|channel|>final<|message|>"
    return [
        ("final-python", harmony(code)),
        ("final-no-return", harmony(code, final_return=False)),
        ("final-python3", harmony(code, "python3")),
        ("final-py", harmony(code, "py")),
        ("final-Python", harmony(code, "Python")),
        ("final-PY", harmony(code, "PY")),
        ("final-plain", harmony(code, "")),
        ("final-plain-same-line", f"{a}ok{f}```{code}\n```<|return|>"),
        ("final-py3-tag", harmony(code, "py3")),
        ("final-python-space", harmony(code, "python ")),
        ("final-cpp-tag", harmony(code, "cpp")),
        ("no-final", f"{a}Thinking.\n```python\n{code}\n```\nDone.<|end|>"),
        ("no-harmony", f"Solution:\n```python\n{code}\n```"),
        ("no-harmony-plain", f"```\n{code}\n```"),
        ("no-block", f"{a}Hmm.{f}{code}<|return|>"),
        ("no-block-at-all", f"{a}I could not solve it.{f}Sorry, no solution.<|return|>"),
        (
            "two-blocks-last-right",
            f"{a}x{f}First try:\n```python\n{wrong}\n```\nBetter:\n```python\n{code}\n```<|return|>",
        ),
        ("two-blocks-last-wrong", f"{a}x{f}```python\n{code}\n```\nOr:\n```python\n{wrong}\n```<|return|>"),
        ("python-then-plain", f"{a}x{f}```python\n{code}\n```\nExample output:\n```\n3\n```<|return|>"),
        ("plain-then-python-analysis", f"{a}```python\n{code}\n```{f}Output:\n```text\n3\n```<|return|>"),
        ("analysis-only-code", f"{a}```python\n{code}\n```{f}The program above is the answer.<|return|>"),
        ("analysis-wrong-final-right", f"{a}```python\n{wrong}\n```{f}```python\n{code}\n```<|return|>"),
        ("analysis-right-final-wrong", f"{a}```python\n{code}\n```{f}```python\n{wrong}\n```<|return|>"),
        (
            "corrupted-marker",
            f"{a}x<|end|><|start|>assistant<|channel|>final 明<|message|>```python\n{code}\n```<|return|>",
        ),
        (
            "marker-digits",
            f"{a}x<|end|><|start|>assistant<|channel|>final537<|message|>```python\n{code}\n```<|return|>",
        ),
        (
            "constrain-marker",
            f"{a}x<|end|><|start|>assistant<|channel|>final<|constrain|>code<|message|>```python\n{code}\n```<|return|>",
        ),
        ("unclosed-final", f"{a}x{f}```python\n{code}\n<|return|>"),
        ("empty-block", f"{a}x{f}```python\n```<|return|>"),
        ("indented-block", f"{a}x{f}  ```python\n  {code}\n  ```<|return|>"),
        ("text-after-return", f"{a}x{f}```python\n{code}\n```<|return|>trailing ```python\n{wrong}\n```"),
        (
            "two-finals",
            f"{a}x{f}```python\n{wrong}\n```<|return|><|start|>assistant<|channel|>final<|message|>```python\n{code}\n```<|return|>",
        ),
        ("leading-whitespace", f"\n\n   {a}x{f}```python\n{code}\n```<|return|>   \n"),
        ("inline-backticks", f"{a}x{f}Use `input()`.\n```python\n{code}\n```<|return|>"),
    ]


def corpus() -> list[dict[str, Any]]:
    """Every entry, in a stable order with stable ids."""
    entries: list[dict[str, Any]] = []
    for problem, label, code in PROGRAMS:
        entries.append({"id": f"{problem}/{label}", "problem": problem, "output": harmony(code)})
    shaped = [
        ("add", _ADD_OK, "a, b = map(int, input().split())\nprint(a * b)"),
        ("twosum", _TWOSUM_OK, "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 0]"),
        ("upper", "import sys\nprint(sys.stdin.read().upper())", "print(input())"),
        ("addtwo", "def addTwo(a, b):\n    return a + b", "def addTwo(a, b):\n    return a - b"),
    ]
    for problem, code, wrong in shaped:
        for label, output in _shapes(code, wrong):
            entries.append({"id": f"{problem}/shape/{label}", "problem": problem, "output": output})
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)), "corpus ids must be unique"
    return entries


def problem_columns(name: str) -> dict[str, Any]:
    """The LiveCodeBench problem columns of ``name`` (what :func:`parse_tests` reads)."""
    return PROBLEMS[name]


def evaluation_sample(name: str) -> dict[str, str]:
    """lcb_runner's evaluation sample of ``name``: public then private tests, fn_name from the
    metadata (what CodeGenerationProblem.get_evaluation_sample builds)."""
    columns = PROBLEMS[name]
    tests = json.loads(columns["public_test_cases"]) + json.loads(columns["private_test_cases"])
    fn_name = json.loads(columns["metadata"]).get("func_name")
    return {
        "input_output": json.dumps(
            {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests], "fn_name": fn_name}
        )
    }


#: Entries where our verdict is meant to differ from the reference's, with the reason (also in
#: the livecodebench module docstring and docs/gpt-oss.md). Empty: none differ.
JUSTIFIED: dict[str, str] = {}
