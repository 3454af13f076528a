"""The config reference generator (mlperf_repro.config_reference) on small schemas: what each
JSON Schema construct renders as, the sections and their order, links, and the --check."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO, SCHEMA

from mlperf_repro import config_reference
from mlperf_repro.cli import main
from mlperf_repro.errors import UserError

SMALL = yaml.safe_load(
    """
title: Small
description: |
  Intro paragraph, see [the topic](docs/config/topic.md).

  Second paragraph.
$defs:
  positive_integer: {type: integer, minimum: 1}
  item:
    description: One item.
    type: object
    properties:
      size: {$ref: "#/$defs/positive_integer", description: Its size.}
required: [name]
properties:
  name: {type: string, pattern: "^(a|b)$", description: "The name, <name> literally."}
  level: {type: number, exclusiveMinimum: 0, exclusiveMaximum: 1, default: 0.5, description: A level.}
  mode: {type: string, enum: [fast, slow], x-default: "`fast` on a CPU", description: The mode.}
  target: {oneOf: [{$ref: "#/$defs/positive_integer"}, {const: auto}], description: A target.}
  things:
    description: |
      Things by name.

      How things work, at length.
    type: object
    propertyNames: {title: thing, pattern: "^[a-z]+$"}
    additionalProperties:
      type: object
      required: [kind]
      properties:
        kind: {type: string, description: The kind.}
        parts:
          description: Parts of the thing.
          type: array
          minItems: 1
          items: {$ref: "#/$defs/item"}
  zebra: {type: boolean, default: false, description: Last key.}
"""
)


def test_sections_follow_the_schema_order_and_nest():
    paths = [(s.path, s.depth) for s in config_reference.sections(SMALL)]
    assert paths == [("", 0), ("things.<thing>", 1), ("things.<thing>.parts[]", 2)]


def test_rows_resolve_refs_enums_ranges_patterns_and_defaults():
    text = config_reference.render(SMALL)
    assert "| `name` (required) | string matching `^(a\\|b)$` |  | The name, &lt;name&gt; literally. |" in text
    assert "| `level` | number > 0, < 1 | `0.5` | A level. |" in text
    assert "| `mode` | one of `fast`, `slow` | `fast` on a CPU | The mode. |" in text
    assert "| `target` | integer >= 1 or `auto` |  | A target. |" in text
    assert "| `zebra` | boolean | `false` | Last key. |" in text
    assert "| `size` | integer >= 1 |  | Its size. |" in text


def test_an_object_row_links_its_section_and_holds_the_first_paragraph():
    text = config_reference.render(SMALL)
    row = next(line for line in text.splitlines() if line.startswith("| `things`"))
    assert "map of `<thing>` (matching `^[a-z]+$`) to object ([`things.<thing>`](#thingsthing))" in row
    assert row.endswith("| Things by name. |")
    section = text.split("## `things.<thing>`", 1)[1].split("## ", 1)[0]
    assert "Things by name.\n\nHow things work, at length." in section
    parts = next(line for line in text.splitlines() if line.startswith("| `parts`"))
    assert "list (at least 1) of object ([`things.<thing>.parts[]`](#thingsthingparts))" in parts
    # A list's section opens with the list's description, then its items'.
    assert "Parts of the thing.\n\nOne item." in text


def test_every_section_has_its_anchor_and_a_contents_entry():
    text = config_reference.render(SMALL)
    for anchor in ("top-level", "thingsthing", "thingsthingparts"):
        assert f'<a id="{anchor}"></a>' in text
        assert f"](#{anchor})" in text


def test_links_are_rewritten_for_the_output_folder():
    assert "[the topic](../docs/config/topic.md)" in config_reference.render(SMALL, base="config")
    assert "[the topic](docs/config/topic.md)" in config_reference.render(SMALL, base="")
    assert "[the topic](topic.md)" in config_reference.render(SMALL, base="docs/config")


def test_the_first_line_says_it_is_generated_and_how():
    first = config_reference.render(SMALL).splitlines()[0]
    assert "Generated" in first and config_reference.COMMAND in first


def test_a_description_split_by_a_comma_is_refused():
    broken = yaml.safe_load("properties:\n  seed: {type: integer, description: Seed of corpus, tokenizer.}\n")
    with pytest.raises(UserError, match="'tokenizer.'.*quote the description"):
        config_reference.render(broken)


def test_an_unresolvable_ref_is_refused():
    with pytest.raises(UserError, match="cannot resolve"):
        config_reference.render({"properties": {"a": {"$ref": "other.yaml#/x"}}})


def test_check_names_the_first_difference_and_the_command(tmp_path):
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(SMALL, sort_keys=False))
    reference = tmp_path / "README.md"
    assert "does not exist" in config_reference.check(reference, schema)
    lines = config_reference.render_file(schema).splitlines(keepends=True)
    reference.write_text("".join(lines))
    assert config_reference.check(reference, schema) is None
    lines[5] = "edited by hand\n"
    reference.write_text("".join(lines))
    problem = config_reference.check(reference, schema)
    assert "first at line 6" in problem and config_reference.COMMAND in problem


def test_cli_writes_and_checks(tmp_path, capsys):
    out = tmp_path / "reference.md"
    assert main(["config-reference", "--check", "-o", str(out)]) == 1
    assert config_reference.COMMAND in capsys.readouterr().err
    assert main(["config-reference", "-o", str(out)]) == 0
    assert main(["config-reference", "--check", "-o", str(out)]) == 0
    out.write_text(out.read_text() + "\nan edit\n")
    assert main(["config-reference", "--check", "-o", str(out)]) == 1


def test_cli_check_defaults_to_the_committed_reference(capsys):
    assert main(["config-reference", "--check"]) == 0
    assert "config/README.md: up to date" in capsys.readouterr().out


def test_printed_reference_is_the_committed_one(capsys):
    assert main(["config-reference", "--schema", str(SCHEMA)]) == 0
    assert capsys.readouterr().out == (REPO / "config" / "README.md").read_text()
