"""Write the evidence map into docs/checker.md (between its markers), from the registry the
rules fill when they are imported:

    .venv/bin/python -m mlperf_repro.check.evidence_doc --write docs/checker.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import tree  # noqa: F401  (importing the rules registers their entries)
from .evidence import markdown_table

MARKERS = ("<!-- evidence-map:start -->", "<!-- evidence-map:end -->")


def write_docs(path: str | Path) -> None:
    """Rewrite the evidence map between the markers of ``path``."""
    page = Path(path)
    text = page.read_text()
    start, end = MARKERS
    if start not in text or end not in text:
        raise SystemExit(f"{path} has no {start} ... {end} markers to write the evidence map between")
    before, rest = text.split(start, 1)
    after = rest.split(end, 1)[1]
    page.write_text(f"{before}{start}\n{markdown_table()}{end}{after}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--write"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m mlperf_repro.check.evidence_doc --write docs/checker.md")
    write_docs(sys.argv[2])
