"""The config reference, rendered from the config schema's descriptions.

The schema (workflow/schemas/config.schema.yaml) is the one place a config key is described;
config/README.md is this module's output (``mlperf-repro config-reference -o
config/README.md``) and a test fails when the committed file differs from it.

The document is one Markdown section per object of the schema, in schema order: the top
level, then each object-valued key's own section right after its parent's (maps such as
``models`` get a section for their entries, ``models.<name>``; lists of objects one for
their items, ``list[]``). A section opens with the descriptions that lead to it (the key's,
then its entries' for a map or list) and holds a table: key, type (``$ref``, enums,
ranges, patterns and sizes resolved), default, meaning.

What the schema says for the reader besides JSON Schema's own keywords:

- ``description``: Markdown. A key's description fills its row (paragraphs joined); an
  object's first paragraph fills its row and the whole description opens its section, so
  it may hold lists and tables. Links are written relative to the repository root and
  rewritten relative to the output's folder.
- ``x-default``: the default in words where no fixed ``default`` applies (``default``
  is filled in by validation; ``x-default`` is only shown), e.g. "the host's median".
- ``propertyNames.title``: the placeholder a map's entries are named by in the section
  paths (``<recipe>``); ``<name>`` without it.

A description with several paragraphs is a literal block (``|``): a folded one (``>``) joins
them. A keyword the renderer does not know is refused (:data:`KEYWORDS`): in YAML flow style
an unquoted comma cuts a description short and makes the rest a key.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import load_yaml
from .errors import UserError

#: Where the reference lives, relative to the repository root, and the command that writes it.
REFERENCE = "config/README.md"
COMMAND = f"mlperf-repro config-reference -o {REFERENCE}"
#: The schema, relative to the repository root (named in the generated file's first line).
SCHEMA = "workflow/schemas/config.schema.yaml"


@dataclass
class Section:
    """One object of the schema: its key path, the descriptions that lead to it, its keys."""

    path: str
    depth: int
    node: dict
    intro: list[str] = field(default_factory=list)


def _resolve(node: Any, defs: dict) -> dict:
    """``node`` with its ``$ref`` (``#/$defs/<name>``) merged in; the node's own keywords win."""
    if not isinstance(node, dict):
        return {}
    seen = []
    while "$ref" in node:
        ref = node["$ref"]
        name = ref.rsplit("/", 1)[-1]
        if not ref.startswith("#/$defs/") or name not in defs:
            raise UserError(f"config schema: cannot resolve $ref {ref!r} (only #/$defs/<name> of the same file)")
        if ref in seen:
            raise UserError(f"config schema: $ref {ref!r} refers to itself")
        seen.append(ref)
        node = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _paragraphs(text: Any) -> list[str]:
    if not isinstance(text, str):
        return []
    return [p.strip("\n") for p in re.split(r"\n[ \t]*\n", text.strip()) if p.strip()]


def _entries(node: dict, defs: dict) -> tuple[str, dict, list[str]] | None:
    """For a map (``additionalProperties`` schema) or a list: the path suffix of one entry,
    the entry's schema and its description; None for anything else."""
    extra = node.get("additionalProperties")
    if not node.get("properties") and isinstance(extra, dict) and extra:
        names = node.get("propertyNames") or {}
        title = names.get("title", "name") if isinstance(names, dict) else "name"
        value = _resolve(extra, defs)
        return f".<{title}>", value, _paragraphs(value.get("description"))
    items = node.get("items")
    if node.get("type") == "array" and isinstance(items, dict):
        value = _resolve(items, defs)
        return "[]", value, _paragraphs(value.get("description"))
    return None


def _section_target(node: dict, path: str, defs: dict) -> tuple[str, dict, list[str]] | None:
    """The section a key leads to: follows maps and lists down to an object with properties."""
    intro: list[str] = []
    while True:
        if node.get("properties"):
            return path, node, intro
        step = _entries(node, defs)
        if step is None:
            return None
        suffix, node, text = step
        path += suffix
        intro += text


#: The keywords the schema uses; anything else is most likely a description cut at a comma in
#: YAML flow style (``{description: a, b}`` is a description "a" and a key "b").
KEYWORDS = frozenset(
    {"$schema", "$defs", "$ref", "title", "description", "default", "x-default", "type", "enum", "const"}
    | {"properties", "additionalProperties", "required", "propertyNames", "minProperties"}
    | {"items", "minItems", "maxItems", "uniqueItems", "oneOf", "anyOf", "pattern", "minLength", "maxLength"}
    | {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)


def unknown_keywords(schema: Any, path: str = "") -> list[str]:
    """Every keyword outside :data:`KEYWORDS`, by where it is."""
    found: list[str] = []
    if not isinstance(schema, dict):
        return found
    for key, value in schema.items():
        where = f"{path}.{key}" if path else key
        if key not in KEYWORDS:
            found.append(f"{path or '(top level)'}: {key!r}")
        elif key in ("properties", "$defs") and isinstance(value, dict):
            for name, sub in value.items():
                found += unknown_keywords(sub, f"{path}.{name}" if path else name)
        elif key in ("additionalProperties", "propertyNames", "items"):
            found += unknown_keywords(value, where)
        elif key in ("oneOf", "anyOf") and isinstance(value, list):
            for option in value:
                found += unknown_keywords(option, where)
    return found


def sections(schema: dict) -> list[Section]:
    """Every section of the reference, in schema order (each object right after its parent)."""
    defs = schema.get("$defs", {})
    found: list[Section] = []

    def walk(node: dict, path: str, depth: int, intro: list[str]) -> None:
        found.append(Section(path, depth, node, intro))
        for name, sub in node.get("properties", {}).items():
            sub = _resolve(sub, defs)
            target = _section_target(sub, f"{path}.{name}" if path else name, defs)
            if target is not None:
                target_path, target_node, more = target
                walk(target_node, target_path, depth + 1, _paragraphs(sub.get("description")) + more)

    walk(_resolve(schema, defs), "", 0, [])
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation but ``-`` and ``_``
    dropped, spaces as hyphens."""
    text = heading.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _heading(path: str) -> str:
    return f"`{path}`" if path else "Top level"


def _code(value: Any) -> str:
    return f"`{_flow(value)}`"


def _flow(value: Any) -> str:
    """A value as YAML flow style writes it: ``[lm_head]``, ``{}``, ``false``, ``0.04``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return str(value)


def _bounds(node: dict) -> list[str]:
    words = []
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in node:
            words.append(f"{sign} {_flow(node[key])}")
    if "multipleOf" in node:
        words.append(f"a multiple of {_flow(node['multipleOf'])}")
    return words


def _enum(values: list) -> str:
    return "one of " + ", ".join(_code(v) for v in values)


class _Types:
    """Type texts, with links to the sections the reference has."""

    def __init__(self, defs: dict, anchors: dict[str, str]):
        self.defs = defs
        self.anchors = anchors

    def text(self, node: Any, path: str) -> str:
        node = _resolve(node, self.defs)
        if "const" in node:
            return _code(node["const"])
        for key in ("oneOf", "anyOf"):
            if key in node:
                return " or ".join(self.text(option, path) for option in node[key])
        if "enum" in node:
            return _enum(node["enum"])
        kind = node.get("type")
        if isinstance(kind, list):
            return " or ".join(kind)
        if kind == "array" or "items" in node:
            return self._array(node, path)
        if kind == "object" or "properties" in node or "additionalProperties" in node:
            return self._object(node, path)
        words = [kind or "any value"]
        if kind == "string":
            if node.get("minLength") == 1:
                words = ["non-empty string"]
            elif "minLength" in node:
                words.append(f"of at least {node['minLength']} characters")
            if "maxLength" in node:
                words.append(f"of at most {node['maxLength']} characters")
            if "pattern" in node:
                words.append(f"matching `{node['pattern']}`")
        words += _bounds(node)
        return " ".join(words[:1]) + (" " + ", ".join(words[1:]) if words[1:] else "")

    def _array(self, node: dict, path: str) -> str:
        sizes = []
        low, high = node.get("minItems"), node.get("maxItems")
        if low is not None and low == high:
            sizes.append(f"exactly {low}")
        else:
            if low:
                sizes.append(f"at least {low}")
            if high is not None:
                sizes.append(f"at most {high}")
        if node.get("uniqueItems"):
            sizes.append("no repeats")
        text = "list" + (f" ({', '.join(sizes)})" if sizes else "")
        items = node.get("items")
        if isinstance(items, dict):
            item = self.text(items, path + "[]")
            text += f" of {item}" if " or " not in item else f" of ({item})"
        return text

    def _object(self, node: dict, path: str) -> str:
        if node.get("properties"):
            return f"object ({self.link(path)})"
        extra = node.get("additionalProperties")
        if not isinstance(extra, dict) or not extra:
            return "object"
        names = node.get("propertyNames") if isinstance(node.get("propertyNames"), dict) else {}
        title = names.get("title", "name")
        rules = []
        if "pattern" in names:
            rules.append(f"matching `{names['pattern']}`")
        if "enum" in names:
            rules.append(_enum(names["enum"]))
        if node.get("minProperties"):
            rules.append(f"at least {node['minProperties']}")
        key = f"`<{title}>`" + (f" ({'; '.join(rules)})" if rules else "")
        return f"map of {key} to {self.text(extra, f'{path}.<{title}>')}"

    def link(self, path: str) -> str:
        return f"[`{path}`](#{self.anchors[path]})"


_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _markdown(text: str, base: str) -> str:
    """Description text as Markdown: ``<`` and ``>`` outside code spans escaped (``<name>``
    is a placeholder, not HTML), relative links rewritten from the repository root to ``base``."""
    out, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_escape(text[last : match.start()], base))
        out.append(match.group(0))
        last = match.end()
    out.append(_escape(text[last:], base))
    return "".join(out)


def _escape(text: str, base: str) -> str:
    text = text.replace("<", "&lt;").replace(">", "&gt;")
    return _LINK.sub(lambda m: f"]({_relative(m.group(1), base)})", text)


def _relative(target: str, base: str) -> str:
    if target.startswith("#") or "://" in target or target.startswith("mailto:"):
        return target
    where, hash_, anchor = target.partition("#")
    relative = os.path.relpath(where, base or ".").replace(os.sep, "/")
    return relative + hash_ + anchor


def _cell(text: str) -> str:
    """One table cell: paragraphs on one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _row_meaning(node: dict, has_section: bool, base: str) -> str:
    paragraphs = [_markdown(p, base) for p in _paragraphs(node.get("description"))]
    if has_section:
        # Its section (linked from the type) holds the whole description; the row the first paragraph.
        paragraphs = paragraphs[:1]
    return _cell("<br><br>".join(" ".join(p.split()) for p in paragraphs))


def render(schema: dict, *, base: str = "config") -> str:
    """The reference for ``schema``. ``base``: the folder (relative to the repository root)
    the document is written to; the descriptions' relative links are rewritten for it."""
    unknown = unknown_keywords(schema)
    if unknown:
        raise UserError(
            "config schema: unknown keyword(s) "
            + "; ".join(unknown)
            + " (a comma in an unquoted flow-style description makes such a key: quote the description;"
            " a JSON Schema keyword new to the schema: teach mlperf_repro.config_reference to render it)"
        )
    defs = schema.get("$defs", {})
    found = sections(schema)
    anchors: dict[str, str] = {}
    used: dict[str, int] = {}
    for section in found:
        anchor = slug(_heading(section.path))
        count = used.get(anchor, 0)
        used[anchor] = count + 1
        anchors[section.path] = anchor if count == 0 else f"{anchor}-{count}"
    types = _Types(defs, anchors)
    root = _resolve(schema, defs)
    lines = [
        f"*Generated from `{SCHEMA}` by `{COMMAND}`: edit the schema's descriptions, not this file, "
        "then run that command (a test fails while the two differ).*",
        "",
        f"# {schema.get('title', 'Configuration')}",
        "",
    ]
    for paragraph in _paragraphs(root.get("description")):
        lines += [_markdown(paragraph, base), ""]
    lines += ["## Contents", ""]
    for section in found:
        lines.append(f"{'  ' * section.depth}- [{_heading(section.path)}](#{anchors[section.path]})")
    lines.append("")
    for section in found:
        # An explicit anchor too: a heading's own anchor is derived from its text, which tools
        # compute differently when the text holds <name> placeholders.
        lines += [f'<a id="{anchors[section.path]}"></a>', "", f"## {_heading(section.path)}", ""]
        for paragraph in section.intro:
            lines += [_markdown(paragraph, base), ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        required = set(section.node.get("required", []))
        for name, sub in section.node.get("properties", {}).items():
            path = f"{section.path}.{name}" if section.path else name
            resolved = _resolve(sub, defs)
            has_section = _section_target(resolved, path, defs) is not None
            key = f"`{name}`" + (" (required)" if name in required else "")
            if "default" in resolved:
                default = _code(resolved["default"])
            else:
                words = resolved.get("x-default", "")
                default = _markdown(words, base) if isinstance(words, str) else _code(words)
            cells = [key, _cell(types.text(resolved, path)), _cell(default), _row_meaning(resolved, has_section, base)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def render_file(schema_path: str | Path, *, base: str = "config") -> str:
    schema = load_yaml(schema_path)
    if not isinstance(schema, dict):
        raise UserError(f"{schema_path}: the config schema must be a mapping")
    return render(schema, base=base)


def check(reference: str | Path, schema_path: str | Path, *, base: str = "config") -> str | None:
    """None when ``reference`` is the schema's rendering; else what differs and what to run."""
    expected = render_file(schema_path, base=base)
    reference = Path(reference)
    actual = reference.read_text() if reference.is_file() else None
    if actual == expected:
        return None
    if actual is None:
        return f"{reference} does not exist; write it with `{COMMAND}`"
    first = _first_difference(actual, expected)
    return (
        f"{reference} differs from the reference generated from {schema_path} (first at line {first}); "
        f"regenerate it with `{COMMAND}` (edit the schema's descriptions, not the generated file)"
    )


def _first_difference(actual: str, expected: str) -> int:
    """The 1-based number of the first line where the two texts differ."""
    ours, theirs = actual.splitlines(), expected.splitlines()
    for number, (a, b) in enumerate(zip(ours, theirs), 1):
        if a != b:
            return number
    return min(len(ours), len(theirs)) + 1
