"""The report's HTML pages (``snakemake --report``): the summary table, the compliance
verdicts and each result's provenance. Self-contained pages (inline style, no scripts) that
Snakemake's report embeds as they are."""

from __future__ import annotations

import csv
import html
import io
import json
from typing import Any

STYLE = """
body { font-family: sans-serif; font-size: 14px; margin: 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.pass { background: #e6f4e6; } td.fail { background: #fbe3e3; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 12px; }
.banner { background: #fff3cd; border: 1px solid #e0c36b; padding: 6px 10px; font-weight: bold; }
"""

_PASS = {"yes", "valid", "pass", "true", "passed"}
_FAIL_PREFIXES = ("no", "invalid", "fail", "false", "kept, failed")


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    low = text.strip().lower()
    cls = ""
    if low in _PASS:
        cls = ' class="pass"'
    elif low.startswith(_FAIL_PREFIXES):
        cls = ' class="fail"'
    return f"<td{cls}>{html.escape(text)}</td>"


def table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    if not rows:
        return "<p>(none)</p>"
    columns = columns or list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(row.get(c)) for c in columns) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def summary_page(summary_csv: str, summary_md: str, check: dict[str, Any] | None = None) -> str:
    """The summary table (results/report/summary.csv) with the check's verdict and the
    Markdown summary's notes (test scale, quantization, demo model) below it."""
    rows = list(csv.DictReader(io.StringIO(summary_csv)))
    parts = []
    if "NOT SUBMITTABLE" in summary_md:
        parts.append(
            '<p class="banner">NOT SUBMITTABLE: test-scale run (shortened durations, reduced sample counts).</p>'
        )
    parts.append("<h2>Results</h2>" + table(rows))
    if check is not None:
        errors = [f for f in check.get("findings", []) if f.get("severity", "error") == "error"]
        verdict = check.get("status") or ("PASS" if not errors else "FAIL")
        parts.append(f"<h2>Submission check: {html.escape(str(verdict))}</h2>")
        if check.get("findings"):
            parts.append(table(check["findings"][:200]))
    notes = [
        line
        for line in summary_md.splitlines()[1:]
        if line and not line.startswith("|") and "NOT SUBMITTABLE" not in line
    ]
    if notes:
        parts.append("<h2>Notes</h2>" + "".join(f"<p>{html.escape(n.strip('*'))}</p>" for n in notes))
    quant_rows = _markdown_tables(summary_md)[1:]
    for rows_ in quant_rows:
        parts.append(table(rows_))
    return page("MLPerf Inference summary", "\n".join(parts))


def _markdown_tables(text: str) -> list[list[dict[str, str]]]:
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif current:
            header, *body = current
            tables.append([dict(zip(header, r, strict=False)) for r in body if not set("".join(r)) <= set("-: ")])
            current = []
    return tables


def compliance_page(verdicts: list[dict[str, Any]]) -> str:
    """One row per compliance test run: where, the test, PASS/FAIL and the verifier's output."""
    rows, details = [], []
    for v in verdicts:
        record = v.get("verdict") or {}
        passed = record.get("passed")
        rows.append(
            {
                "system": v["system"],
                "benchmark": v["benchmark"],
                "scenario": v["scenario"],
                "test": v["test"],
                "verdict": "PASS" if passed else ("FAIL" if passed is False else "missing"),
            }
        )
        text = v.get("verify_text") or json.dumps(record.get("details", {}), indent=2)
        details.append(
            f"<h3>{html.escape(v['system'])} / {html.escape(v['benchmark'])} / {html.escape(v['scenario'])} / "
            f"{html.escape(v['test'])}</h3><pre>{html.escape(text)}</pre>"
        )
    body = table(rows) if rows else "<p>The round names no compliance test for these benchmarks.</p>"
    return page("Compliance verdicts", body + "\n".join(details))


# The provenance facts shown first, as a table; the whole record follows as JSON.
_HEADLINE = ("git_commit", "container", "dataset_file", "dataset_manifest_sha256", "model_dir", "model_manifest_sha256")


def _flat(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        out[prefix] = ", ".join(json.dumps(v) if isinstance(v, dict | list) else str(v) for v in value)
    else:
        out[prefix] = "" if value is None else str(value)


def provenance_page(records: list[dict[str, Any]]) -> str:
    """Each result's provenance.json: the host, software, engine settings, environment and
    input hashes of the run, as a table per result, then the record itself."""
    parts = []
    for r in records:
        prov = r.get("provenance") or {}
        name = f"{r['system']} / {r['benchmark']} / {r['scenario']} ({r.get('mode', 'performance')})"
        flat: dict[str, str] = {}
        _flat("", prov, flat)
        headline = [k for k in _HEADLINE if k in flat] + sorted(k for k in flat if k not in _HEADLINE)
        rows = [{"field": k, "value": flat[k]} for k in headline]
        parts.append(
            f"<h2>{html.escape(name)}</h2><p>{html.escape(r.get('path', ''))}</p>"
            + table(rows, ["field", "value"])
            + "<details><summary>provenance.json</summary>"
            + f"<pre>{html.escape(json.dumps(prov, indent=2, sort_keys=True))}</pre></details>"
        )
    return page("Provenance of each result", "\n".join(parts) or "<p>(no results)</p>")
