"""The acquire stage for one config entry (models.<name> or datasets.<name>).

``builtin:`` sources are built here (the demo model and dataset); every other source is
fetched and verified by :func:`mlperf_repro.fetch.acquire`. Either way the folder ends up
with manifest.sha256 + ACQUIRED.json and a record is written for provenance.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from . import RECORD_NAME, acquire, record_built, verify_dir


def _write_json(path: str | Path, data: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _fetch(entry: dict[str, Any], dest_dir: Path) -> dict[str, Any]:
    record = acquire(
        entry["source"],
        dest_dir,
        sha256=entry.get("sha256"),
        manifest=entry.get("sha256_manifest"),
        allow_unverified=entry.get("allow_unverified", False),
    )
    if entry.get("bundled_from"):  # from an offline bundle (mlperf_repro.bundle): the source is the config's
        record = {**record, "source": entry["bundled_from"], "bundle": entry["source"]}
        (dest_dir / RECORD_NAME).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def acquire_model_entry(entry: dict[str, Any], dest_dir: str | Path, record_path: str | Path) -> dict[str, Any]:
    dest_dir = Path(dest_dir)
    if entry["source"].startswith("builtin:"):
        from ..demo.checkpoints import build_model

        report = build_model(entry["source"], entry.get("builtin"), dest_dir)
        record = record_built(dest_dir, entry["source"], report)
    else:
        record = _fetch(entry, dest_dir)
        shipped = _build_report(dest_dir)
        if shipped is not None:
            record["build"] = shipped
    _write_json(record_path, record)
    return record


def _build_report(model_dir: Path) -> dict[str, Any] | None:
    """The report of the build that made a shipped demo checkpoint (artifacts/models), which
    the summary shows like a model built here; None for any other model (or an unreadable one)."""
    from ..demo.checkpoints import REPORT_NAME

    try:
        report = json.loads((model_dir / REPORT_NAME).read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def acquire_dataset_entry(
    entry: dict[str, Any],
    dest_dir: str | Path,
    record_path: str | Path,
    tokenizer_dir: str | Path | None,
    build: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``build`` (Plan.dataset_build_args) tells a builtin stand-in which files to write."""
    dest_dir = Path(dest_dir)
    if entry["source"] == "builtin:openorca-synthetic":
        from transformers import AutoTokenizer

        from ..demo.dataset import build_dataset

        verify_dir(tokenizer_dir)
        builtin = entry.get("builtin") or {}
        if dest_dir.exists():
            shutil.rmtree(dest_dir)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        samples = build_dataset(
            dest_dir / entry["file"], tokenizer, samples=builtin.get("samples", 256), seed=builtin.get("seed", 7)
        )
        record = record_built(
            dest_dir, entry["source"], {"samples": samples, "tokenizer": str(tokenizer_dir), **builtin}
        )
    elif entry["source"] == "builtin:vbench-prompts-synthetic":
        from ..demo.video_prompts import write_prompt_file

        builtin = entry.get("builtin") or {}
        if dest_dir.exists():
            shutil.rmtree(dest_dir)
        rows = {
            entry["file"]: write_prompt_file(
                dest_dir / entry["file"], builtin.get("samples", 248), builtin.get("seed", 7)
            )
        }
        record = record_built(dest_dir, entry["source"], {"rows": rows, **builtin})
    elif entry["source"] == "builtin:gpt-oss-synthetic":
        from transformers import AutoTokenizer

        from ..demo.gpt_oss_dataset import build_dataset as build_gpt_oss

        verify_dir(tokenizer_dir)
        builtin = entry.get("builtin") or {}
        build = build or {}
        files = dict(build.get("files") or {}) or {"performance": entry["file"]}
        if dest_dir.exists():
            shutil.rmtree(dest_dir)
        rows = build_gpt_oss(
            dest_dir,
            files,
            AutoTokenizer.from_pretrained(tokenizer_dir),
            samples=builtin.get("samples", 256),
            seed=builtin.get("seed", 7),
            repeats=build.get("repeats") or {},
            rows=build.get("rows") or {},
            efforts=build.get("efforts") or {},
        )
        record = record_built(dest_dir, entry["source"], {"rows": rows, "tokenizer": str(tokenizer_dir), **builtin})
    else:
        record = _fetch(entry, dest_dir)
    if not (dest_dir / entry["file"]).is_file():
        from ..errors import UserError

        raise UserError(
            f"dataset {dest_dir} has no file '{entry['file']}' (datasets.<name>.file); "
            f"it contains: {', '.join(sorted(p.name for p in dest_dir.iterdir()))}"
        )
    _write_json(record_path, record)
    return record
