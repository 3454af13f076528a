"""The install's bytecode for the workflow's imports (mlperf_repro.bytecode)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mlperf_repro import bytecode


def test_every_listed_import_exists_in_this_environment():
    """The list names modules of the pinned environment: one that moved in a new pin would
    silently go back to compiling at every import. Checked by file, without importing."""
    for group in bytecode.IMPORT_GROUPS:
        for entry in group:
            name = entry.partition(":")[0]
            top, _, rest = name.partition(".")
            spec = importlib.util.find_spec(top)
            assert spec is not None, f"{entry}: no package {top}"
            if not rest:
                continue
            base = Path(spec.submodule_search_locations[0]).joinpath(*rest.split("."))
            assert base.with_suffix(".py").is_file() or (base / "__init__.py").is_file(), entry


def test_imports_write_bytecode_and_their_folders_are_compiled(tmp_path, monkeypatch):
    """With PYTHONDONTWRITEBYTECODE set (as on this project's machines), what a group imports
    gets its .pyc, and so does the rest of each folder under the roots it came from."""
    package = tmp_path / "site" / "warmpkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "entry.py").write_text("from .sub import used\nVALUE = used.VALUE\n")
    (package / "sibling.py").write_text("VALUE = 2\n")  # same folder, never imported
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "used.py").write_text("VALUE = 1\n")
    (package / "sub" / "deeper").mkdir()
    (package / "sub" / "deeper" / "unused.py").write_text("VALUE = 3\n")  # a folder nothing imported from
    outside = tmp_path / "other" / "elsewhere.py"
    outside.parent.mkdir()
    outside.write_text("VALUE = 4\n")
    (outside.parent / "beside.py").write_text("VALUE = 5\n")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'site'}:{outside.parent}")

    report = bytecode.warm(
        (("warmpkg.entry", "elsewhere", "no_such_module_here"),), sys.executable, [tmp_path / "site"]
    )

    def compiled(path: Path) -> bool:
        return any((path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"))

    assert all(compiled(p) for p in (package / "__init__.py", package / "entry.py", package / "sibling.py"))
    assert compiled(package / "sub" / "used.py")
    assert not compiled(package / "sub" / "deeper" / "unused.py")
    # Imported from outside the roots: its own bytecode (written by the import), not its folder's.
    assert compiled(outside) and not compiled(outside.parent / "beside.py")
    assert report["failed"] == 0
    assert [m.split(":")[0] for m in report["missing"]] == ["no_such_module_here"]
