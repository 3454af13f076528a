"""Every config key in the schema has a description, and config/README.md is the schema's
rendering (mlperf-repro config-reference): the committed file and the schema never disagree."""

from __future__ import annotations

import re

from conftest import REPO, SCHEMA

from mlperf_repro import config_reference
from mlperf_repro.config import load_yaml

READMES = [REPO / "config" / "README.md", *sorted((REPO / "docs" / "config").glob("*.md"))]


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
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _keys(items, defs, f"{path}[]")


def test_every_key_is_described():
    schema = load_yaml(SCHEMA)
    missing = [
        path
        for path, sub in _keys(schema, schema["$defs"])
        if not (
            sub.get("description") or schema["$defs"].get(sub.get("$ref", "").split("/")[-1], {}).get("description")
        )
    ]
    assert not missing, f"schema keys without a description: {missing}"


def test_config_reference_is_the_schemas_rendering():
    problem = config_reference.check(REPO / config_reference.REFERENCE, SCHEMA)
    assert problem is None, problem


def test_every_key_has_a_row_in_the_reference():
    schema = load_yaml(SCHEMA)
    reference = (REPO / config_reference.REFERENCE).read_text()
    for path, _ in _keys(schema, schema["$defs"]):
        assert f"| `{path.rsplit('.', 1)[-1].split('[')[0]}`" in reference, path


def _anchors(text: str) -> set[str]:
    headings = {config_reference.slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    return headings | set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_links_of_the_reference_and_the_topic_pages_resolve():
    broken = []
    for page in READMES:
        text = page.read_text()
        prose = re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)  # code spans hold no links
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if "://" in target:
                continue
            where, _, anchor = target.partition("#")
            file = (page.parent / where).resolve() if where else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, broken
