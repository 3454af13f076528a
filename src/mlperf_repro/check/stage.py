"""The check stage: run every check on the packaged tree and write a report."""

from __future__ import annotations

import json
from pathlib import Path

from ..benchmarks import load_round
from .tree import check_tree


def _result_line(findings) -> str:
    """The verdict line both reports share, so tools can grep one shape."""
    errors = sum(f.severity == "error" for f in findings)
    status = "PASS" if not errors else "FAIL"
    return f"result: {status} ({errors} error(s), {len(findings) - errors} warning(s))"


def check_job(tree: str, round_name: str, out_txt: str, out_json: str) -> int:
    findings = check_tree(tree, load_round(round_name))
    errors = [f for f in findings if f.severity == "error"]
    not_submittable = (Path(tree) / "NOT_SUBMITTABLE.md").is_file()
    status = "PASS" if not errors else "FAIL"
    header = [f"mlperf-repro check of {tree} against the {round_name} rules", _result_line(findings)]
    if not_submittable:
        header.append("marking: NOT SUBMITTABLE (test scale)")
    Path(out_txt).parent.mkdir(parents=True, exist_ok=True)
    Path(out_txt).write_text("\n".join(header + [""] + [f.line() for f in findings]) + "\n")
    Path(out_json).write_text(
        json.dumps(
            {
                "status": status,
                "not_submittable": not_submittable,
                "findings": [f.__dict__ for f in findings],
            },
            indent=2,
        )
        + "\n"
    )
    return len(errors)


def preflight_job(config: dict, out_txt: str, workdir: str = ".") -> None:
    """Write the preflight report; stop the workflow (before any run) if it has errors."""
    from ..errors import UserError
    from .preflight import preflight

    findings = preflight(config, workdir)
    errors = [f for f in findings if f.severity == "error"]
    lines = [f"mlperf-repro preflight against the {config['round']} rules", _result_line(findings)]
    lines += [f.line() for f in findings]
    Path(out_txt).parent.mkdir(parents=True, exist_ok=True)
    Path(out_txt).write_text("\n".join(lines) + "\n")
    for finding in findings:
        if finding.severity != "error":
            print(finding.line())
    if errors:
        raise UserError(
            "the preflight check found problems to fix before any run starts:\n  "
            + "\n  ".join(f.line() for f in errors)
        )
