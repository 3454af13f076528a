"""``python -m mlperf_repro compare REFERENCE PARTNER [PARTNER ...]``.

Each argument is a submission tree, a published results repository, or a tarball of
either; several comma-separated paths form one input of repeat runs. Writes
``<out>/<reference>_vs_<partner>.{md,csv,html}``, prints the Markdown, and exits 0 when
every result is within the tolerance, 1 when some are not (a CI gate), 2 on bad input.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ..archive import Limits
from ..errors import UserError
from .render import to_csv, to_html, to_markdown
from .report import Comparison, compare_paths


def output_stem(comparison: Comparison) -> str:
    return f"{_clean(comparison.reference.label)}_vs_{_clean(comparison.partner.label)}"


def _clean(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-")


def write_outputs(comparison: Comparison, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = output_stem(comparison)
    written = []
    for suffix, render in (("md", to_markdown), ("csv", to_csv), ("html", to_html)):
        path = out / f"{stem}.{suffix}"
        path.write_text(render(comparison))
        written.append(path)
    return written


def stems(reference: str, partners: list[str]) -> list[str]:
    """Report file stems for these inputs, known before anything is read (for Snakemake)."""
    from .report import input_label

    return [f"{_clean(input_label(reference))}_vs_{_clean(input_label(p))}" for p in partners]


def compare_job(reference: str, partners: list[str], settings: dict, out_dir: str) -> bool:
    """The workflow's compare rule: write the reports; fail only if asked to."""
    comparisons = compare_paths(
        reference, partners, tolerance=settings.get("tolerance", 0.04), submitter=settings.get("submitter")
    )
    for comparison in comparisons:
        write_outputs(comparison, out_dir)
        print(to_markdown(comparison))
    ok = all(c.ok for c in comparisons)
    if not ok and settings.get("fail_outside_tolerance"):
        raise UserError(
            f"some results are outside the tolerance (compare.fail_outside_tolerance is set); see {out_dir}"
        )
    return ok


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "reference",
        help="the reference submission (tree, results repository or tarball; comma-separated paths for repeat runs)",
    )
    parser.add_argument("partners", nargs="+", help="partner submissions, same forms")
    parser.add_argument("--tolerance", type=float, default=0.04, help="allowed relative gap (default 0.04 = 4%%)")
    parser.add_argument("--out", default="results/compare", help="folder for the .md/.csv/.html reports")
    parser.add_argument("--submitter", help="only the reference's results of this submitter (published repositories)")
    parser.add_argument("--max-bytes", type=int, default=Limits.max_bytes, help="archive expansion limit")
    parser.add_argument("--max-files", type=int, default=Limits.max_files, help="archive entry-count limit")
    parser.add_argument("--quiet", action="store_true", help="do not print the Markdown")


def run(args: argparse.Namespace) -> int:
    comparisons = compare_paths(
        args.reference,
        args.partners,
        tolerance=args.tolerance,
        limits=Limits(args.max_bytes, args.max_files),
        submitter=args.submitter,
    )
    for comparison in comparisons:
        paths = write_outputs(comparison, args.out)
        if not args.quiet:
            print(to_markdown(comparison))
        print(f"written: {', '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0 if all(c.ok for c in comparisons) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlperf_repro compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
