"""Every config key in the schema has a description and appears in config/README.md."""

from __future__ import annotations

from conftest import REPO, SCHEMA

from mlperf_repro.config import load_yaml


def _keys(schema: dict, defs: dict, path: str = ""):
    if "$ref" in schema:
        schema = defs[schema["$ref"].split("/")[-1]]
    for name, sub in schema.get("properties", {}).items():
        full = f"{path}.{name}" if path else name
        yield full, sub
        yield from _keys(sub, defs, full)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield from _keys(extra, defs, f"{path}.<name>")


def test_every_key_is_described_and_documented():
    schema = load_yaml(SCHEMA)
    readme = (REPO / "config" / "README.md").read_text()
    missing_description, undocumented = [], []
    for path, sub in _keys(schema, schema["$defs"]):
        resolved = schema["$defs"][sub["$ref"].split("/")[-1]] if "$ref" in sub else sub
        if not (sub.get("description") or resolved.get("description")):
            missing_description.append(path)
        leaf = path.split(".")[-1]
        if f"`{leaf}`" not in readme and f"`{path}`" not in readme and f"{leaf}`" not in readme:
            undocumented.append(path)
    assert not missing_description, missing_description
    assert not undocumented, undocumented
