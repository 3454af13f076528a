"""Cosmetic differences: two spellings of one fact in a hand-written field.

System descriptions and measurements.json are typed by people, so the same machine appears as
"PCIe Gen 5 x16" and "PCIe Gen5 x16", "3.0 TB" and "3 TB", "288GB" and "288 GB", "HBM3e" and
"HBM3E". :func:`cosmetic_form` maps a value onto one spelling; two values with the same form
differ only cosmetically, and ``compare`` lists them apart instead of as causes.

What the form ignores:
- whitespace, letter case, and Unicode look-alikes (non-breaking spaces and hyphens, en dashes);
- a hyphen or underscore between a digit and a letter ("Gen-5", "288-GB");
- trailing zeros of a decimal number that is not part of a dotted version ("3.0" and "3", but
  "7.0.0" stays);
- the spelling of a byte or bit unit after a number ("GB", "GByte", "gb"; "Gbps", "Gbit/s", "Gb/s");
- an empty value and "N/A" / "NA" / "none" / "-": each states nothing.

What it keeps, because the values then state different facts:
- bits against bytes ("10 Gb" is not "10 GB"): the unit's b/B keeps its case (an all-lowercase
  "gb" or "tb" is read as bytes: its writer used no case, and descriptions mostly state memory
  and storage sizes);
- binary against decimal prefixes ("3 TiB" is not "3 TB"; they differ by 10%, and the form does
  not guess which one the writer meant);
- any other word, digit or punctuation ("PCIe Gen5" is not "PCIe Gen5 x16").
"""

from __future__ import annotations

import re
import unicodedata

# Hyphen look-alikes an editor may put in (U+2010-U+2015, minus sign).
DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-")
NOT_STATED = frozenset({"", "n/a", "na", "none", "-"})
# A number followed by a byte or bit unit: 288GB, 3.0 TiB, 400 Gbps, 10 Gbit/s.
SIZE_UNIT = re.compile(
    r"(?P<number>\d+(?:\.\d+)?)[\s_-]*(?P<prefix>[kKmMgGtTpPeE])(?P<binary>i?)"
    r"(?P<unit>bytes?|Bytes?|BYTES?|bits?|Bits?|BITS?|bps|Bps|BPS|B|b)(?P<rate>/s)?(?![A-Za-z])"
)
TRAILING_ZEROS = re.compile(r"(?<![\d.])(\d+)\.(\d*?)0+(?![\d.])")
DIGIT_LETTER_JOINER = re.compile(r"(?<=\d)[-_](?=[A-Za-z])|(?<=[A-Za-z])[-_](?=\d)")


def _number(text: str) -> str:
    return TRAILING_ZEROS.sub(lambda m: m.group(1) + (f".{m.group(2)}" if m.group(2) else ""), text)


def _unit(match: re.Match) -> str:
    unit = match["unit"]
    # "Gb" is bits; an all-lowercase "gb"/"tb" says nothing by its case: read as bytes.
    bits = unit in ("bps", "BPS") or unit.lower().startswith("bit") or (unit == "b" and match["prefix"].isupper())
    rate = bool(match["rate"]) or unit.lower() == "bps"
    return f"{_number(match['number'])}{match['prefix'].upper()}{match['binary']}{'b' if bits else 'B'}{'/s' if rate else ''}"


def cosmetic_form(value: str | None) -> str:
    """The spelling-independent form of a hand-written value (see the module docstring)."""
    text = unicodedata.normalize("NFKC", value or "").translate(DASHES).strip()
    if text.casefold() in NOT_STATED:
        return ""
    text = DIGIT_LETTER_JOINER.sub("", text)
    parts, last = [], 0
    # Units keep the case that separates bits from bytes; the rest is compared without case.
    for match in SIZE_UNIT.finditer(text):
        parts += [_number(text[last : match.start()]).casefold(), _unit(match)]
        last = match.end()
    parts.append(_number(text[last:]).casefold())
    return re.sub(r"\s+", "", "".join(parts))


def differs_only_cosmetically(a: str | None, b: str | None) -> bool:
    return a != b and cosmetic_form(a) == cosmetic_form(b)
