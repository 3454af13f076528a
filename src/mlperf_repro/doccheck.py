"""The docs are checked like code (``python -m mlperf_repro.doccheck``, run by ``.ci/lint``).

Links: every relative link in the project's Markdown (``LINKED_DOCS``) points at a file or
folder that exists, and a ``#anchor`` into a Markdown file names one of its headings.

Commands: every fenced command block (```` ```bash ````, ``sh``, ``shell``, ``console``) of
README.md and docs/ says on the line before it who runs it::

    <!-- run-by: tests/test_docs_commands.py::test_block_runs -->
    <!-- not-run: needs a SLURM cluster with GPUs -->

A ``run-by`` names one or more targets, comma-separated: a test (``tests/test_x.py::NAME``)
or test file (``tests/test_x.py``), which must exist, that runs the block's commands, or a
script of the project (``.ci/run``) whose text holds every one of them. A ``not-run`` gives
the reason. ``tests/test_docs_commands.py`` runs the blocks that name its runners
(docs/testing.md).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

#: The Markdown whose relative links must resolve.
LINKED_DOCS = ("README.md", "docs/**/*.md", "config/README.md", "bench/README.md")
#: The Markdown whose command blocks must be run by a test or say why not.
COMMAND_DOCS = ("README.md", "docs/**/*.md")
COMMAND_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>run-by|not-run)\s*:\s*(?P<value>.*?)\s*-->\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(?P<text>.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"(?P<id>[^\"]+)\"")
INLINE_LINK = re.compile(r"\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(?P<target>[^\s>]+)>?")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
TEST_TARGET = re.compile(r"^(?P<file>tests/(?:[\w.-]+/)*test_[\w.-]*\.py)(?:::(?P<name>[\w:]+?)(?:\[.*\])?)?$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (1-based line of its opening fence), its language,
    its text, and the marker on the line before it (``kind`` None when there is none)."""

    path: Path
    line: int
    language: str
    text: str
    kind: str | None = None
    value: str = ""

    @property
    def is_command(self) -> bool:
        return self.language in COMMAND_LANGUAGES

    @property
    def targets(self) -> list[str]:
        return [t.strip() for t in self.value.split(",") if t.strip()] if self.kind == "run-by" else []

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"


@dataclass(frozen=True)
class Markdown:
    """A Markdown file split into what the checks read: its fenced blocks, the lines outside
    them (1-based numbers), and the markers that precede no command block."""

    blocks: list[Block]
    prose: list[tuple[int, str]]
    stray_markers: list[int]


def parse(path: Path) -> Markdown:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    pending: tuple[int, str, str] | None = None  # the last marker and its line, until a block or prose
    stray: list[int] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        opening = FENCE.match(line)
        if opening:
            fence = opening["fence"]
            closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
            end = i + 1
            while end < len(lines) and not closing.match(lines[end]):
                end += 1
            body = [
                text[len(opening["indent"]) :] if text.startswith(opening["indent"]) else text.lstrip()
                for text in lines[i + 1 : end]
            ]
            language = opening["info"].lower()
            kind, value = (pending[1], pending[2]) if pending else (None, "")
            block = Block(path, i + 1, language, "\n".join(body) + "\n", kind, value)
            if pending and not block.is_command:
                stray.append(pending[0])
            blocks.append(block)
            pending = None
            i = end + 1
            continue
        marker = MARKER.match(line)
        if marker:
            if pending:
                stray.append(pending[0])
            pending = (i + 1, marker["kind"], marker["value"])
        elif line.strip():
            if pending:
                stray.append(pending[0])
                pending = None
            prose.append((i + 1, line))
        i += 1
    if pending:
        stray.append(pending[0])
    return Markdown(blocks, prose, stray)


def doc_files(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        found.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(found)


def commands(block: Block) -> list[str]:
    """The block's commands, one per logical line: continuation lines joined, comments and
    blank lines left out; in a ``console`` block only the lines after a ``$ `` prompt."""
    out: list[str] = []
    current = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if block.language == "console" and not current:
            if not line.lstrip().startswith("$ "):
                continue
            line = line.lstrip()[2:]
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1].rstrip() + " "
            continue
        current += line.strip()
        out.append(current.strip())
        current = ""
    if current.strip():
        out.append(current.strip())
    return out


def without_comment(command: str) -> str:
    """``command`` without a trailing ``# comment`` (a ``#`` after whitespace, outside quotes)."""
    quote = None
    for i, char in enumerate(command):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command


def simple_commands(block: Block) -> list[str]:
    """Each command of the block split at ``&&``, without comments: what a script that runs
    the block must hold."""
    parts = []
    for command in commands(block):
        parts += [p.strip() for p in without_comment(command).split("&&") if p.strip()]
    return parts


def defines(test_file: Path, name: str) -> bool:
    """Whether ``test_file`` defines ``name`` (a function, or ``Class::method``)."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    scope: list[ast.stmt] = tree.body
    parts = name.split("::")
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef) if last else (ast.ClassDef,)
        node = next((n for n in scope if isinstance(n, kinds) and n.name == part), None)
        if node is None:
            return False
        scope = getattr(node, "body", [])
    return True


def target_problem(root: Path, block: Block, target: str) -> str | None:
    test = TEST_TARGET.match(target)
    if test:
        test_file = root / test["file"]
        if not test_file.is_file():
            return f"run-by names {target}, but {test['file']} does not exist"
        if test["name"] and not defines(test_file, test["name"]):
            return f"run-by names {target}, but {test['file']} defines no {test['name']}"
        return None
    script = root / target
    if not script.is_file():
        return (
            f"run-by names {target!r}: neither a test (tests/FILE.py::NAME) nor a file of the project "
            "whose text holds the block's commands"
        )
    text = " ".join(script.read_text(encoding="utf-8").split())
    missing = [c for c in simple_commands(block) if " ".join(c.split()) not in text]
    if missing:
        return f"run-by names {target}, which does not run: {'; '.join(missing)}"
    return None


def check_blocks(root: Path) -> list[str]:
    """One line per command block without a marker, marker naming a missing test or script,
    ``not-run`` without a reason, and marker that precedes no command block."""
    problems = []
    for path in doc_files(root, COMMAND_DOCS):
        doc = parse(path)
        name = path.relative_to(root)
        for line in doc.stray_markers:
            problems.append(f"{name}:{line}: a run-by/not-run marker must come right before a command block")
        for block in doc.blocks:
            if not block.is_command:
                continue
            where = block.where(root)
            if block.kind is None:
                problems.append(
                    f"{where}: a {block.language} block without a marker: put "
                    "<!-- run-by: tests/FILE.py::TEST --> or <!-- not-run: REASON --> on the line before it"
                )
            elif block.kind == "not-run" and len(block.value.split()) < 2:
                problems.append(f"{where}: not-run needs the reason it cannot run here")
            elif block.kind == "run-by":
                if not block.targets:
                    problems.append(f"{where}: run-by names no test")
                problems += [f"{where}: {p}" for t in block.targets if (p := target_problem(root, block, t))]
    return problems


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-`` and ``_`` removed,
    spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(doc: Markdown) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in doc.prose:
        found.update(m["id"] for m in HTML_ANCHOR.finditer(line))
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading["text"])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(doc: Markdown) -> list[tuple[int, str]]:
    """``(line, target)`` of every inline and reference link outside code."""
    found = []
    for number, line in doc.prose:
        reference = REFERENCE_LINK.match(line)
        if reference:
            found.append((number, reference["target"]))
            continue
        text = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        found += [(number, m["target"]) for m in INLINE_LINK.finditer(text)]
    return found


def check_links(root: Path) -> list[str]:
    """One line per relative link whose file does not exist or whose anchor names no heading."""
    problems = []
    parsed: dict[Path, Markdown] = {}

    def markdown(path: Path) -> Markdown:
        if path not in parsed:
            parsed[path] = parse(path)
        return parsed[path]

    for path in doc_files(root, LINKED_DOCS):
        name = path.relative_to(root)
        for line, target in links(markdown(path)):
            if SCHEME.match(target):
                continue  # http(s), mailto: not checked here (no network)
            file_part, _, anchor = target.partition("#")
            file_part = urllib.parse.unquote(file_part)
            if file_part:
                base = root if file_part.startswith("/") else path.parent
                resolved = (base / file_part.lstrip("/")).resolve()
                if not resolved.exists():
                    problems.append(f"{name}:{line}: {target}: {file_part} does not exist")
                    continue
            else:
                resolved = path
            if anchor and resolved.is_file() and resolved.suffix == ".md":
                if urllib.parse.unquote(anchor).lower() not in anchors(markdown(resolved)):
                    problems.append(f"{name}:{line}: {target}: no heading #{anchor} in {resolved.name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlperf_repro.doccheck",
        description="Check the docs: relative links resolve, every command block is run by a test or says why not.",
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository root (default: .)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    problems = check_links(root) + check_blocks(root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"doccheck: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
