"""YAML parsed with libyaml's safe loader where PyYAML has it (the pure-Python one otherwise).

Every Snakemake start, and every job that loads the config, parses the config schema and the
round's rules tables: about 0.5 s a time with the pure-Python loader, several times less with
libyaml's (bench/README.md, issue 34). Both build the same plain data from safe YAML.
"""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str | bytes) -> Any:
    """yaml.safe_load's result; errors are yaml.YAMLError as there."""
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 (a safe loader)
