"""Command line: ``python -m mlperf_repro <command>`` (also installed as ``mlperf-repro``).

Commands: ``compare`` (partners' submissions against a reference). The workflow itself
runs with ``snakemake``.
"""

from __future__ import annotations

import argparse
import sys

from .errors import UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlperf-repro", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    from .compare import cli as compare_cli

    compare_parser = commands.add_parser("compare", help="compare partners' submissions with a reference",
                                         description=compare_cli.__doc__,
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
    compare_cli.add_arguments(compare_parser)
    args = parser.parse_args(argv)
    try:
        if args.command == "compare":
            return compare_cli.run(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
