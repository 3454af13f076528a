"""Tree hygiene (names, sizes, empty folders, links and special files) and the
test-scale mark."""

from __future__ import annotations

from ..evidence import cross_checked, record_kind
from ..findings import Finding
from ..model import (
    NOT_SUBMITTABLE_MARK,
    TreeContext,
    rule,
)


@rule(
    "hygiene",
    evidence=[
        cross_checked(
            "the tree's entries", "<kind>", "regular files and folders only (links, FIFOs, devices are errors)"
        ),
        cross_checked("the tree's entries", "<size>", "the round's tree_limits.max_file_bytes"),
    ],
)
def check_hygiene(ctx: TreeContext) -> list[Finding]:
    """Names, sizes and empty folders as MLCommons' upload checks want them; and regular
    files and folders only: a link or a special file is refused (and never followed or
    opened: see check/files.py)."""
    findings = []
    max_bytes = int(ctx.rules["tree_limits"]["max_file_bytes"])
    regular_only = "a submitted tree holds regular files and folders only"
    for rel, entry in ctx.files.walk(ctx.base):
        name = rel.rsplit("/", 1)[-1]
        if name.startswith("."):
            findings.append(Finding("hygiene", rel, "names starting with '.' are not allowed"))
        if " " in name:
            findings.append(Finding("hygiene", rel, "spaces in names are not allowed"))
        if name == "__pycache__":
            findings.append(Finding("hygiene", rel, "__pycache__ folders are not allowed"))
        if entry.kind == "symbolic link":
            findings.append(
                Finding(
                    "hygiene",
                    rel,
                    f"symbolic link to {entry.target!r}: {regular_only} (the checker does not follow it; "
                    "put the file itself there)",
                )
            )
        elif entry.kind == "file" and entry.links > 1:
            findings.append(
                Finding(
                    "hygiene",
                    rel,
                    f"hard link (one file under {entry.links} names): {regular_only}; a file must be "
                    "in the tree once (copy it)",
                )
            )
        elif entry.kind not in ("file", "folder"):
            findings.append(Finding("hygiene", rel, f"{entry.kind}: {regular_only} (the checker does not open it)"))
        elif entry.kind == "file" and entry.size > max_bytes:
            findings.append(Finding("hygiene", rel, f"file larger than {max_bytes // 2**20} MB"))
        elif entry.kind == "folder" and not ctx.files.children(ctx.root / rel):
            findings.append(Finding("hygiene", rel, "empty folder"))
    for rel, why in ctx.files.problems:
        if ctx.files.relative(ctx.base) in (rel, ".") or rel.startswith(ctx.rel(ctx.base) + "/"):
            findings.append(Finding("hygiene", rel, why))
    return findings


record_kind(
    "NOT_SUBMITTABLE.md",
    "/../NOT_SUBMITTABLE.md",
    "text",
    "the mark of a test-scale tree",
    trusted={"<presence>": "a mark we write: nothing else in a tree records its scale"},
)


@rule("marking")
def check_marking(ctx: TreeContext) -> list[Finding]:
    if ctx.test_scale:
        return [
            Finding(
                "marking",
                NOT_SUBMITTABLE_MARK,
                "test-scale tree: NOT SUBMITTABLE (round minimums not checked)",
                "warning",
            )
        ]
    return []
