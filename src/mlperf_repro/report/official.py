"""The official-style results: the submission checker's summary CSV and the final-report
spreadsheet MLCommons builds from it, computed from a packaged tree.

The CSV has the checker's columns (from the rules table) in its order, every value quoted;
the spreadsheet has one sheet per suite and division ("datacenter - closed", ...) with
one row per system and a column per benchmark / scenario / unit, plus "- power" sheets
when power results exist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..benchmarks import Round
from ..check.tree import PERF, load_context

SUITES = ("datacenter", "edge")


def official_rows(tree: str | Path, rules: Round) -> list[dict[str, Any]]:
    ctx, _ = load_context(tree, rules)
    if ctx is None:
        return []
    rows = []
    for result in ctx.results:
        system_path = ctx.base / "systems" / f"{result.system}.json"
        detail = result.detail(PERF)
        if result.facts is None or detail is None or not system_path.is_file():
            continue
        system = json.loads(system_path.read_text())
        measurements = json.loads((result.path / "measurements.json").read_text())
        accuracy_txt = result.path / "accuracy" / "accuracy.txt"
        values = result.facts.accuracy_values(accuracy_txt.read_text()) if accuracy_txt.is_file() else {}
        notes = system.get("hw_notes", "")
        if system.get("sw_notes"):
            notes = (notes + ". " if notes else "") + system["sw_notes"]
        effective = str(detail.get("effective_scenario", ""))
        rows.append(
            {
                "Organization": ctx.submitter,
                "Availability": system.get("status", ""),
                "Division": ctx.division,
                "SystemType": system.get("system_type", ""),
                "SystemName": system.get("system_name", ""),
                "Platform": result.system,
                "Model": result.benchmark,
                "MlperfModel": result.mlperf_benchmark,
                "Scenario": result.scenario,
                "Result": _result(result, detail),
                # The checker writes its metric dict without quotes, commas or braces.
                "Accuracy": "  ".join(f"{k.upper()}: {v}" for k, v in values.items()),
                "number_of_nodes": system.get("number_of_nodes", ""),
                "host_processor_model_name": system.get("host_processor_model_name", ""),
                "host_processors_per_node": system.get("host_processors_per_node", ""),
                "host_processor_core_count": system.get("host_processor_core_count", ""),
                "accelerator_model_name": system.get("accelerator_model_name", ""),
                "accelerators_per_node": system.get("accelerators_per_node", ""),
                "total_accelerators": int(system.get("number_of_nodes", 0) or 0)
                * int(system.get("accelerators_per_node", 0) or 0),
                "Location": ctx.rel(result.path / PERF).rsplit("/", 1)[0],
                "framework": system.get("framework", ""),
                "operating_system": system.get("operating_system", ""),
                "notes": notes,
                "compliance": ctx.division,
                "errors": 0,
                "version": rules.name,
                # Interactive comes from a Server log by definition; anything else is inferred.
                "inferred": 0 if effective == rules.loadgen_scenario(result.scenario) else 1,
                "has_power": (result.path / "performance" / "power").is_dir(),
                "Units": result.facts.result_unit(result.scenario),
                "weight_data_types": measurements.get("weight_data_types", ""),
                "design_power_watts": "",
                "PrivateID": "",
            }
        )
    return rows


def to_official_csv(rows: list[dict[str, Any]], rules: Round) -> str:
    columns = rules["summary_csv_columns"]
    lines = [",".join(columns)]
    lines += [",".join(f'"{row.get(column, "")}"' for column in columns) for row in rows]
    return "\n".join(lines) + "\n"


def write_final_report(rows: list[dict[str, Any]], rules: Round, out_path: str | Path) -> list[str]:
    """The spreadsheet; returns the sheet names written."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    version = rules.name.lstrip("v")
    unique_ids: dict[str, str] = {}
    index_columns = [
        "ID",
        "Unique ID (e.g. for Audit)",
        "Submitter",
        "Availability",
        "System",
        "Nodes",
        "Processor",
        "p#",
        "Accelerator",
        "a#",
        "Total Accelerators",
        "Software",
        "Notes",
    ]
    workbook = Workbook()
    workbook.remove(workbook.active)
    sheets = []
    for category in rules["divisions"]:
        for suite in SUITES:
            for power in (False, True):
                selected = [
                    r
                    for r in rows
                    if r["Division"] == category and suite in str(r["SystemType"]) and bool(r["has_power"]) == power
                ]
                if not selected:
                    continue
                name = f"{suite} - {category}" + (" - power" if power else "")
                sheet = workbook.create_sheet(name)
                sheets.append(name)
                results = sorted({(r["MlperfModel"], r["Scenario"], r["Units"]) for r in selected})
                extra = ["UsedModel", "Accuracy"] if category == "open" else []
                header = index_columns + extra + [f"{m} {s} ({u})" for m, s, u in results]
                sheet.append(header)
                for cell in sheet[1]:
                    cell.font = Font(bold=True)
                systems: dict[tuple, dict[str, Any]] = {}
                for r in selected:
                    key_parts = [suite, category, r["Organization"], r["Platform"]] + (
                        [r["Model"]] if category == "open" else []
                    )
                    uid = "/".join(key_parts)
                    unique_ids.setdefault(uid, f"{version}-{len(unique_ids) + 1:04d}")
                    row = systems.setdefault(
                        tuple(key_parts),
                        {
                            "ID": unique_ids[uid],
                            "Unique ID (e.g. for Audit)": uid,
                            "Submitter": r["Organization"],
                            "Availability": r["Availability"],
                            "System": r["SystemName"],
                            "Nodes": r["number_of_nodes"],
                            "Processor": r["host_processor_model_name"],
                            "p#": r["host_processors_per_node"],
                            "Accelerator": r["accelerator_model_name"],
                            "a#": r["accelerators_per_node"],
                            "Total Accelerators": r["total_accelerators"],
                            "Software": r["framework"],
                            "Notes": r["notes"],
                            "UsedModel": r["Model"],
                            "Accuracy": r["Accuracy"],
                        },
                    )
                    row[f"{r['MlperfModel']} {r['Scenario']} ({r['Units']})"] = _number(r["Result"])
                for row in systems.values():
                    sheet.append([row.get(column, "") for column in header])
    if not sheets:
        workbook.create_sheet("no results")
    workbook.save(out_path)
    return sheets


def _number(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def official_summary_job(tree: str, round_name: str, out_csv: str, out_xlsx: str) -> None:
    from ..benchmarks import load_round

    rules = load_round(round_name)
    rows = official_rows(tree, rules)
    Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    Path(out_csv).write_text(to_official_csv(rows, rules))
    write_final_report(rows, rules, out_xlsx)


def _result(result, detail: dict) -> Any:
    """The checker's Result: a latency in its reported unit, a rate as logged."""
    raw = detail.get(result.result_field(), "")
    if result.is_endpoints or result.facts is None:
        return raw
    value = result.facts.result_value(result.scenario, raw)
    return raw if value is None or value == float(raw) else value
