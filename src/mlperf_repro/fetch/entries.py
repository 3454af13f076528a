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

from . import acquire, record_built, verify_dir


def _write_json(path: str | Path, data: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _fetch(entry: dict[str, Any], dest_dir: Path) -> dict[str, Any]:
    return acquire(
        entry["source"],
        dest_dir,
        sha256=entry.get("sha256"),
        manifest=entry.get("sha256_manifest"),
        allow_unverified=entry.get("allow_unverified", False),
    )


def _builtin_spec(spec_class, entry: dict[str, Any]):
    """The builtin model's spec from ``models.<name>.builtin``; a key the kind does not take
    is a clear error (the schema lists the keys of every kind together)."""
    import dataclasses

    from ..errors import UserError

    values = dict(entry.get("builtin") or {})
    known = {f.name for f in dataclasses.fields(spec_class)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UserError(
            f"models.<name>.builtin: {', '.join(unknown)} mean nothing to {entry['source']} "
            f"(its keys: {', '.join(sorted(known))})"
        )
    if "vae_dim_mult" in values:
        values["vae_dim_mult"] = tuple(values["vae_dim_mult"])
    return spec_class(**values)


def acquire_model_entry(entry: dict[str, Any], dest_dir: str | Path, record_path: str | Path) -> dict[str, Any]:
    dest_dir = Path(dest_dir)
    if entry["source"] == "builtin:tiny-llama":
        from ..accuracy.llama2 import postprocess_text
        from ..accuracy.rouge import rouge_scores
        from ..demo.model import DemoModelSpec, build_and_train

        spec = _builtin_spec(DemoModelSpec, entry)
        if dest_dir.exists():
            shutil.rmtree(dest_dir)
        report = build_and_train(dest_dir, spec, rouge=lambda p, r: rouge_scores(*postprocess_text(p, r), workers=1))
        record = record_built(dest_dir, entry["source"], report)
    elif entry["source"] == "builtin:tiny-gpt-oss":
        from ..demo import gpt_oss_model
        from ..demo.model import DemoModelSpec

        spec = _builtin_spec(DemoModelSpec, entry)
        if dest_dir.exists():
            shutil.rmtree(dest_dir)
        report = gpt_oss_model.build_and_train(dest_dir, spec)
        record = record_built(dest_dir, entry["source"], report)
    elif entry["source"] == "builtin:tiny-wan":
        from ..demo.wan_model import TinyWanSpec, build_tiny_wan

        if dest_dir.exists():
            shutil.rmtree(dest_dir)
        report = build_tiny_wan(dest_dir, _builtin_spec(TinyWanSpec, entry))
        record = record_built(dest_dir, entry["source"], report)
    else:
        record = _fetch(entry, dest_dir)
    _write_json(record_path, record)
    return record


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
