"""``python -m mlperf_repro.bundle DIR``: verify an offline bundle with the standard library only
(install.sh --from-bundle runs it before installing anything, so nothing is half-installed)."""

from __future__ import annotations

import sys

from ..errors import UserError
from .build import verify_bundle


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m mlperf_repro.bundle DIR", file=sys.stderr)
        return 2
    try:
        manifest, problems = verify_bundle(argv[0])
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in problems:
        print(f"bundle: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
