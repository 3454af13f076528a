"""Pair results across inputs and rank the differences that can explain a gap.

A *cause* is one setting that differs between the reference and a partner, with every
place it shows (a target_qps change is one cause seen in user.conf and in LoadGen's
log). Causes are ranked by how directly they move the measured number: LoadGen settings
and user.conf first, then engine settings and environment, generation and quantization,
model and dataset identity, the measurements and system descriptions, a run against a
differing lock file (its override), software versions, host facts and finally the code.
Settings that follow from others (Offline's samples per query from target_qps and duration)
are folded into their parent cause.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .records import Record

# (settings-key prefix, category label, rank weight)
CATEGORIES = (
    ("loadgen.", "LoadGen settings", 100),
    ("user.conf.", "user.conf", 95),
    ("mlperf.conf.", "mlperf.conf", 90),
    ("engine.", "engine settings", 85),
    ("env.", "environment variables", 80),
    ("generation.", "generation settings", 78),
    ("quantization.", "quantization", 75),
    ("inputs.", "model and dataset", 70),
    ("measurements.", "measurements.json", 60),
    ("system.", "system description", 50),
    # A run that went ahead although its environment differed from the lock file.
    ("lock.", "environment (lock)", 47),
    ("software.", "software versions", 45),
    ("host.", "host facts", 40),
    ("model_mapping", "model mapping", 38),
    ("compliance.", "compliance verdicts", 35),
    ("code:", "code and documentation", 30),
)
# user.conf / LoadGen spellings of the same setting -> one cause name.
ALIASES = {"min_duration": "min_duration_ms", "max_duration": "max_duration_ms"}
# The lock record's keys, one cause each: the override with the differences it accepted, the lock itself.
LOCK_CAUSES = {"lock.override": "lock override", "lock.differences": "lock override", "lock.sha256": "lock file"}
# Settings LoadGen derives from others: reported with their parent, not on their own.
DERIVED = {"loadgen.samples_per_query": ("target_qps", "min_duration_ms", "min_query_count")}


@dataclass
class Cause:
    name: str
    category: str
    weight: int
    evidence: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (key, reference, partner)

    def describe(self) -> str:
        parts = [f"{key}: {_show(a)} -> {_show(b)}" for key, a, b in self.evidence]
        return "; ".join(parts)


def _show(value: str | None) -> str:
    return "(absent)" if value is None else value


def category_of(key: str) -> tuple[str, int]:
    for prefix, label, weight in CATEGORIES:
        if key.startswith(prefix):
            return label, weight
    return "other", 10


def cause_name(key: str) -> str:
    """The setting a key is about: llama2-70b.Server.target_qps and loadgen.target_qps are both target_qps."""
    if key.startswith("user.conf.") or key.startswith("mlperf.conf."):
        tail = key.split(".")[-1]
        return ALIASES.get(tail, tail)
    if key.startswith("loadgen."):
        tail = key[len("loadgen.") :]
        return ALIASES.get(tail, tail)
    return LOCK_CAUSES.get(key, key)


def setting_differences(reference: dict[str, str], partner: dict[str, str]) -> dict[str, tuple[str | None, str | None]]:
    return {
        key: (reference.get(key), partner.get(key))
        for key in sorted(set(reference) | set(partner))
        if reference.get(key) != partner.get(key)
    }


def rank_causes(reference: Record, partner: Record) -> tuple[list[Cause], int]:
    """Ranked causes and the number of identical settings (code files included)."""
    differences = setting_differences(reference.settings, partner.settings)
    causes: dict[str, Cause] = {}
    derived: list[tuple[str, tuple]] = []
    for key, (a, b) in differences.items():
        if key in DERIVED:
            derived.append((key, (a, b)))
            continue
        label, weight = category_of(key)
        name = cause_name(key)
        cause = causes.setdefault(name, Cause(name, label, weight))
        cause.weight = max(cause.weight, weight)
        if weight == cause.weight:
            cause.category = label
        cause.evidence.append((key, a, b))
    for key, (a, b) in derived:
        parents = [causes[p] for p in DERIVED[key] if p in causes]
        target = parents[0] if parents else causes.setdefault(key, Cause(key, *category_of(key)))
        target.evidence.append((key, a, b))
    code_changes = sorted(
        set(reference.code) ^ set(partner.code)
        | {p for p in set(reference.code) & set(partner.code) if reference.code[p] != partner.code[p]}
    )
    if code_changes:
        label, weight = category_of("code:")
        causes["code"] = Cause(
            "code",
            label,
            weight,
            [(p, _short(reference.code.get(p)), _short(partner.code.get(p))) for p in code_changes],
        )
    identical = len(set(reference.settings) & set(partner.settings)) - sum(
        1 for k in set(reference.settings) & set(partner.settings) if reference.settings[k] != partner.settings[k]
    )
    identical += len(set(reference.code) & set(partner.code)) - sum(
        1 for p in set(reference.code) & set(partner.code) if reference.code[p] != partner.code[p]
    )
    ranked = sorted(causes.values(), key=lambda c: (-c.weight, c.name))
    return ranked, identical


def _short(digest: str | None) -> str | None:
    return None if digest is None else digest[:12]


def pair_records(reference: list[Record], partner: list[Record]) -> list[tuple[Record, Record]]:
    """Match each partner result with the reference's: same benchmark and scenario, then the
    same system name, else the same accelerator model and count, else the only candidate."""
    pairs = []
    by_key: dict[tuple[str, str], list[Record]] = {}
    for record in reference:
        by_key.setdefault(record.key, []).append(record)
    for record in partner:
        candidates = by_key.get(record.key, [])
        match = next((c for c in candidates if c.system == record.system), None)
        if match is None:
            model = record.settings.get("system.accelerator_model_name")
            same_hw = [
                c
                for c in candidates
                if c.settings.get("system.accelerator_model_name") == model and c.accelerators == record.accelerators
            ]
            if len(same_hw) == 1:
                match = same_hw[0]
            elif len(candidates) == 1:
                match = candidates[0]
        if match is not None:
            pairs.append((match, record))
    return pairs


def timing_only(records: Iterable[Record]) -> bool:
    """True when the records differ only in measured numbers (repeat runs of one setup)."""
    records = list(records)
    return all(r.settings == records[0].settings and r.code == records[0].code for r in records[1:])
