"""The demo models: built from a seed (``builtin:`` sources), and shipped as the project's own
trained artifacts under ``artifacts/models/<name>/`` with a sha256 manifest beside each.

Training the default config's stand-in took about 95 s of a 2-core machine on every fresh
run. The trained checkpoint is a few MB, so the project ships it and the default config
acquires it like any downloaded model (``file://`` source, ``sha256_manifest``: verified, not
trusted). ``mlperf-repro demo-checkpoints`` rebuilds each shipped checkpoint from the source
and spec recorded in its ``build_report.json``; ``--check`` rebuilds into a scratch folder and
names every file that differs from the committed manifest.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError

#: Where the project keeps its trained demo checkpoints (each ``<name>/`` + ``<name>.sha256``).
SHIPPED_DIR = Path(__file__).resolve().parents[3] / "artifacts" / "models"
#: The build report inside a built model folder: source, spec, training curve, held-out scores.
#: Deterministic (no timings), so a rebuild can be compared with the shipped one file by file.
REPORT_NAME = "build_report.json"


def _tiny_llama(dest: Path, spec: Any, log: Callable[[str], None]) -> dict[str, Any]:
    from ..accuracy.llama2 import postprocess_text
    from ..accuracy.rouge import rouge_scores
    from .model import build_and_train

    return build_and_train(dest, spec, rouge=lambda p, r: rouge_scores(*postprocess_text(p, r), workers=1), log=log)


def _tiny_gpt_oss(dest: Path, spec: Any, log: Callable[[str], None]) -> dict[str, Any]:
    from .gpt_oss_model import build_and_train

    return build_and_train(dest, spec, log=log)


def _tiny_wan(dest: Path, spec: Any, log: Callable[[str], None]) -> dict[str, Any]:
    from .wan_model import build_tiny_wan

    return build_tiny_wan(dest, spec)


def _spec_classes() -> dict[str, type]:
    from .model import DemoModelSpec
    from .wan_model import TinyWanSpec

    return {"builtin:tiny-llama": DemoModelSpec, "builtin:tiny-gpt-oss": DemoModelSpec, "builtin:tiny-wan": TinyWanSpec}


BUILDERS: dict[str, Callable[[Path, Any, Callable[[str], None]], dict[str, Any]]] = {
    "builtin:tiny-llama": _tiny_llama,
    "builtin:tiny-gpt-oss": _tiny_gpt_oss,
    "builtin:tiny-wan": _tiny_wan,
}


def builtin_spec(source: str, values: dict[str, Any] | None):
    """The builtin model's spec from ``models.<name>.builtin``; a key the kind does not take is
    a clear error (the schema lists the keys of every kind together)."""
    spec_class = _spec_classes()[source]
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(spec_class)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UserError(
            f"models.<name>.builtin: {', '.join(unknown)} mean nothing to {source} (its keys: {', '.join(sorted(known))})"
        )
    if "vae_dim_mult" in values:
        values["vae_dim_mult"] = tuple(values["vae_dim_mult"])
    return spec_class(**values)


def build_model(source: str, builtin: dict[str, Any] | None, dest_dir: str | Path, log=print) -> dict[str, Any]:
    """Build a ``builtin:`` model into ``dest_dir`` (replaced) and return its build report; the
    report, less its timing, is also written into the folder as ``build_report.json``. The
    build runs in a child process with pinned CPU numerics (:mod:`.pinned_build`); its output
    lines go to ``log``."""
    from .pinned_build import run_pinned

    if source not in BUILDERS:
        raise UserError(f"unknown builtin model {source!r}; known: {', '.join(sorted(BUILDERS))}")
    builtin_spec(source, builtin)  # a bad key is an error before a process starts
    return run_pinned(__name__, {"source": source, "builtin": dict(builtin or {}), "dest_dir": str(dest_dir)}, log)


def build_model_here(source: str, builtin: dict[str, Any] | None, dest_dir: str | Path, *, numerics: dict) -> dict:
    """build_model's work, in this process (the pinned child's side)."""
    dest_dir = Path(dest_dir)
    spec = builtin_spec(source, builtin)
    if dest_dir.exists():
        shutil.rmtree(dest_dir)
    report = {**BUILDERS[source](dest_dir, spec, print), "numerics": numerics}
    recorded = {k: v for k, v in report.items() if k != "build_seconds"}
    # The config's own keys (not the filled-in spec): what a config says to rebuild it.
    recorded = {"source": source, "builtin": dict(builtin or {}), **recorded}
    (dest_dir / REPORT_NAME).write_text(json.dumps(recorded, indent=2, sort_keys=True, default=list) + "\n")
    return report


def manifest_lines(folder: Path) -> str:
    """sha256sum lines for every file under ``folder`` (sorted, POSIX paths)."""
    from ..hashing import sha256_file

    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return "".join(f"{sha256_file(p)}  {p.relative_to(folder).as_posix()}\n" for p in files)


def _read_manifest_lines(path: Path) -> dict[str, str]:
    """{path: sha256} of a manifest :func:`manifest_lines` wrote (the acquire stage reads the
    same files with fetch.read_manifest, which checks them as outside input)."""
    pairs = (line.split("  ", 1) for line in path.read_text().splitlines() if line.strip())
    return {relpath: digest for digest, relpath in pairs}


def shipped_names(root: Path = SHIPPED_DIR) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / REPORT_NAME).is_file()) if root.is_dir() else []


def shipped_report(name: str, root: Path = SHIPPED_DIR) -> dict[str, Any]:
    path = root / name / REPORT_NAME
    if not path.is_file():
        known = ", ".join(shipped_names(root)) or "none"
        raise UserError(f"no shipped demo checkpoint {name!r} ({path} is missing); shipped: {known}")
    return json.loads(path.read_text())


def rebuild(name: str, out_root: str | Path, *, root: Path = SHIPPED_DIR, log=print) -> Path:
    """Rebuild shipped checkpoint ``name`` from its recorded source and spec into
    ``out_root/<name>/`` and write ``out_root/<name>.sha256``."""
    report = shipped_report(name, root)
    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    dest = out_root / name
    build_model(report["source"], report.get("builtin"), dest, log=log)
    (out_root / f"{name}.sha256").write_text(manifest_lines(dest))
    return dest


def differences(name: str, rebuilt_root: Path, *, root: Path = SHIPPED_DIR) -> list[str]:
    """Files whose checksum differs between the shipped manifest and a rebuild's (missing or extra too)."""
    shipped = _read_manifest_lines(root / f"{name}.sha256")
    rebuilt = _read_manifest_lines(rebuilt_root / f"{name}.sha256")
    return sorted(path for path in set(shipped) | set(rebuilt) if shipped.get(path) != rebuilt.get(path))


def check(name: str, *, root: Path = SHIPPED_DIR, log=print) -> list[str]:
    """Rebuild ``name`` in a scratch folder; the files that differ from what is shipped, each
    numerics setting that differs between the two builds last (``numerics.<key>: shipped A,
    rebuilt B``: the likely cause)."""
    with tempfile.TemporaryDirectory(prefix=f"{name}-rebuild-") as scratch:
        rebuild(name, scratch, root=root, log=log)
        differing = differences(name, Path(scratch), root=root)
        if differing:
            shipped = shipped_report(name, root).get("numerics") or {}
            rebuilt = shipped_report(name, Path(scratch)).get("numerics") or {}
            differing += [
                f"numerics.{key}: shipped {shipped.get(key, 'unrecorded')}, rebuilt {rebuilt.get(key, 'unrecorded')}"
                for key in sorted(set(shipped) | set(rebuilt))
                if shipped.get(key) != rebuilt.get(key)
            ]
        return differing


def _build_child(request_path: str) -> int:
    """The pinned child's side of build_model (pinned_build.run_pinned starts it)."""
    from .pinned_build import check_pinned

    request = json.loads(Path(request_path).read_text())
    try:
        report = build_model_here(request["source"], request["builtin"], request["dest_dir"], numerics=check_pinned())
    except UserError as exc:
        print(exc, file=sys.stderr)
        return 2
    Path(request["report"]).write_text(json.dumps(report, default=list))
    return 0


if __name__ == "__main__":
    sys.exit(_build_child(sys.argv[1]))
