"""Pair results across inputs and rank the differences that can explain a gap.

A *cause* is one setting that differs between the reference and a partner, with every
place it shows (a target_qps change is one cause seen in user.conf and in LoadGen's log).
Causes are ranked by how directly they move the measured throughput:

1. Server and Interactive target_qps: there the result is the rate LoadGen was told to issue
   at, so a lower target is the gap itself.
2. The serving setup: backend, checkpoint, engine arguments, parallel layout, environment
   variables, sampling (max_tokens and the like change how many tokens a query costs); then
   quantization and the identity of the model and dataset; then the software stack (framework
   and library versions in the system description, package versions and the container image
   in our provenance, LoadGen's version), and a run made with a lock override (its environment
   differed from the lock file it was pinned by). These decide how fast the same queries are served.
3. LoadGen's latency limits (they decide validity, and a partner tuning to pass them tunes
   the rate; no Offline run is bound by them, so there they rank with run length), other
   LoadGen settings, and measurements.json.
4. Run length and bookkeeping: min/max duration, min/max query count, the performance and
   accuracy sample counts, the seeds and the QSL sizes, and Offline's target_qps (for Offline
   it only sets how many samples the one query holds, target_qps x min_duration; the result
   is the rate they are served at). A longer run changes the share of the warm-up and the
   tail, a few percent at most, so these rank below anything that changes how queries are
   served. Offline's samples_per_query follows from them and is folded into its parent.
5. Descriptions and facts with no setting behind them: the system description (written by
   hand; hardware differences also show in the system pairing), host facts, the model
   mapping and compliance verdicts, then the code: files the serving setup was read from
   (their settings already ranked above), other code and documentation, and names.

Hand-written fields (system description, measurements.json) that differ only in spelling
(:func:`mlperf_repro.compare.cosmetic.cosmetic_form`) are listed apart as cosmetic, not as
causes. When only one side's serving setup is known (a result whose code states none), its
serving settings are one cause saying so, not one per key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from .cosmetic import differs_only_cosmetically
from .records import Record

# (category label, rank weight); a higher weight ranks first.
LOADGEN_RATE = ("LoadGen rate", 100)
SERVING_BACKEND = ("serving backend", 96)
CHECKPOINT = ("checkpoint", 95)
ENGINE = ("serving engine arguments", 93)
PARALLEL = ("parallel layout", 92)
ENV = ("serving environment variables", 90)
SAMPLING = ("sampling settings", 88)
QUANTIZATION = ("quantization", 85)
INPUTS = ("model and dataset", 84)
SOFTWARE = ("software stack", 80)
# A run that went ahead although its environment differed from the lock file (its override).
LOCK = ("environment (lock)", 79)
SERVING_UNKNOWN = ("serving setup", 78)
LATENCY = ("LoadGen latency limits", 72)
LOADGEN_OTHER = ("LoadGen settings", 66)
MEASUREMENTS = ("measurements.json", 64)
OFFLINE_TARGET = ("LoadGen run length", 62)
RUN_LENGTH = ("LoadGen run length", 60)
SYSTEM = ("system description", 50)
HOST = ("host facts", 45)
MODEL_MAPPING = ("model mapping", 38)
COMPLIANCE = ("compliance verdicts", 35)
SERVING_FILES = ("harness config files", 32)
CODE = ("code and documentation", 30)
NAMES = ("names", 5)
OTHER = ("other", 10)

# Category -> kind of difference (Cause.kind): a partner asks first whether a gap comes from
# the configuration, the environment or the hardware; what none explains is only measured.
KINDS = {
    label: kind
    for kind, categories in (
        (
            "configuration",
            (LOADGEN_RATE, SERVING_BACKEND, CHECKPOINT, ENGINE, PARALLEL, ENV, SAMPLING, QUANTIZATION, INPUTS)
            + (SERVING_UNKNOWN, LATENCY, LOADGEN_OTHER, MEASUREMENTS, OFFLINE_TARGET, RUN_LENGTH, MODEL_MAPPING),
        ),
        ("environment", (SOFTWARE, LOCK, HOST)),
        ("hardware", (SYSTEM,)),
        ("code", (SERVING_FILES, CODE)),
        ("names", (NAMES, COMPLIANCE)),
    )
    for label, _ in categories
}

# Keys whose category is not their prefix's.
KEY_CATEGORIES = {
    "serving.backend": SERVING_BACKEND,
    "serving.checkpoint": CHECKPOINT,
    "serving.serve_quantized_as": CHECKPOINT,
    "system.framework": SOFTWARE,
    "system.other_software_stack": SOFTWARE,
    "loadgen.version": SOFTWARE,
    "host.os": SOFTWARE,
    "host.kernel": SOFTWARE,
    "git_changes": CODE,
    "git_commit": CODE,
    "system.submitter": NAMES,
    "system.system_name": NAMES,
    "loadgen.sut_name": NAMES,
}
PREFIX_CATEGORIES = (
    ("serving.engine.", ENGINE),
    ("serving.parallel.", PARALLEL),
    ("serving.env.", ENV),
    ("serving.sampling.", SAMPLING),
    ("quantization.", QUANTIZATION),
    ("inputs.", INPUTS),
    ("software.", SOFTWARE),
    ("lock.", LOCK),
    ("measurements.", MEASUREMENTS),
    ("system.", SYSTEM),
    ("host.drivers.", SOFTWARE),
    ("host.", HOST),
    ("model_mapping", MODEL_MAPPING),
    ("compliance.", COMPLIANCE),
)
LOADGEN_PREFIXES = ("loadgen.", "user.conf.", "mlperf.conf.")
LATENCY_SETTINGS = frozenset(
    {
        "target_latency_ns",
        "target_latency_percentile",
        "server_ttft_latency",
        "server_tpot_latency",
        "use_token_latencies",
    }
)
RUN_LENGTH_SETTINGS = frozenset(
    {
        "min_duration_ms",
        "max_duration_ms",
        "min_query_count",
        "max_query_count",
        "performance_sample_count",
        "accuracy_sample_count",
        "samples_per_query",
        "sample_concatenate_permutation",
        "qsl_rng_seed",
        "sample_index_rng_seed",
        "schedule_rng_seed",
        "qsl_reported_total_count",
        "qsl_reported_performance_count",
    }
)
# Scenarios whose result is the issue rate LoadGen was given.
RATE_SCENARIOS = ("Server", "Interactive")
# user.conf / LoadGen spellings of the same setting -> one cause name.
ALIASES = {
    "min_duration": "min_duration_ms",
    "max_duration": "max_duration_ms",
    "performance_sample_count_override": "performance_sample_count",
    "target_latency": "target_latency_ns",
    "ttft_latency": "server_ttft_latency",
    "tpot_latency": "server_tpot_latency",
}
# The lock record's keys, one cause each: the override with the differences it accepted, the lock itself.
LOCK_CAUSES = {"lock.override": "lock override", "lock.differences": "lock override", "lock.sha256": "lock file"}
# Settings LoadGen derives from others: reported with their parent, not on their own.
DERIVED = {"loadgen.samples_per_query": ("target_qps", "min_duration_ms", "min_query_count")}
# Hand-written fields, where a difference in spelling alone is cosmetic.
COSMETIC_PREFIXES = ("system.", "measurements.")
MAX_NAMED_KEYS = 8  # serving keys named in a harness-config cause's note


@dataclass
class Cause:
    name: str
    category: str
    weight: int
    evidence: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (key, reference, partner)
    note: str = ""

    @property
    def kind(self) -> str:
        """What sort of difference it is for a partner: configuration (what the config or harness
        sets), environment (software, host, a lock override), hardware (the description), code."""
        return KINDS.get(self.category, "other")

    def describe(self) -> str:
        parts = [f"{key}: {_show(a)} -> {_show(b)}" for key, a, b in self.evidence]
        return "; ".join(parts) + (f" ({self.note})" if self.note else "")


class Ranking(NamedTuple):
    causes: list[Cause]
    identical: int  # settings and code files the two share
    cosmetic: list[tuple[str, str | None, str | None]]  # (key, reference, partner) differing in spelling only
    # (key, reference, partner): values each side measured (target_qps: auto), timings, not causes
    measured: list[tuple[str, str | None, str | None]] = []


# The user.conf comment a find-performance pass leaves (userconf.user_conf_from_request): the
# target_qps below it was measured on the run host, so two runs differ in it as in any timing.
MEASURED_TARGET = "loadgen.target_qps_chosen_by"
MEASURED_KEYS = ("target_qps", "samples_per_query")  # the target and what LoadGen derives from it


def _show(value: str | None) -> str:
    return "(absent)" if value is None else value


def category_of(key: str, scenario: str = "") -> tuple[str, int]:
    """(label, weight) of a settings key in a result of this scenario."""
    if key in KEY_CATEGORIES:
        return KEY_CATEGORIES[key]
    if key.startswith(LOADGEN_PREFIXES):
        setting = cause_name(key)
        if setting == "target_qps":
            return LOADGEN_RATE if scenario in RATE_SCENARIOS else OFFLINE_TARGET
        if setting in LATENCY_SETTINGS:
            return LATENCY if scenario != "Offline" else RUN_LENGTH
        return RUN_LENGTH if setting in RUN_LENGTH_SETTINGS else LOADGEN_OTHER
    for prefix, category in PREFIX_CATEGORIES:
        if key.startswith(prefix):
            return category
    return OTHER


def cause_name(key: str) -> str:
    """The setting a key is about: llama2-70b.Server.target_qps and loadgen.target_qps are both target_qps."""
    if key.startswith("user.conf.") or key.startswith("mlperf.conf."):
        tail = key.split(".")[-1]
        return ALIASES.get(tail, tail)
    if key.startswith("loadgen.") and key not in KEY_CATEGORIES:  # loadgen.version is no setting
        tail = key[len("loadgen.") :]
        return ALIASES.get(tail, tail)
    return LOCK_CAUSES.get(key, key)


def setting_differences(reference: dict[str, str], partner: dict[str, str]) -> dict[str, tuple[str | None, str | None]]:
    return {
        key: (reference.get(key), partner.get(key))
        for key in sorted(set(reference) | set(partner))
        if reference.get(key) != partner.get(key)
    }


def _has_serving(record: Record) -> bool:
    return "serving.backend" in record.settings


def rank_causes(reference: Record, partner: Record) -> Ranking:
    """Ranked causes, the number of identical settings (code files included) and the cosmetic differences."""
    differences = setting_differences(reference.settings, partner.settings)
    scenario = partner.scenario
    causes: dict[str, Cause] = {}
    derived: list[tuple[str, tuple]] = []
    cosmetic = []
    one_sided_serving = []
    serving_known_once = _has_serving(reference) != _has_serving(partner)
    both_measured = (
        reference.settings.get(MEASURED_TARGET) == partner.settings.get(MEASURED_TARGET) == "find-performance"
    )
    measured = []
    for key, (a, b) in differences.items():
        if key.startswith(COSMETIC_PREFIXES) and differs_only_cosmetically(a, b):
            cosmetic.append((key, a, b))
            continue
        if both_measured and key.startswith(LOADGEN_PREFIXES) and cause_name(key) in MEASURED_KEYS:
            measured.append((key, a, b))
            continue
        if serving_known_once and key.startswith("serving.") and key != "serving.serve_quantized_as":
            one_sided_serving.append(key)
            continue
        if key in DERIVED:
            derived.append((key, (a, b)))
            continue
        label, weight = category_of(key, scenario)
        name = cause_name(key)
        cause = causes.setdefault(name, Cause(name, label, weight))
        if weight > cause.weight:
            cause.weight, cause.category = weight, label
        cause.evidence.append((key, a, b))
    for key, (a, b) in derived:
        parents = [causes[p] for p in DERIVED[key] if p in causes]
        target = parents[0] if parents else causes.setdefault(key, Cause(key, *category_of(key, scenario)))
        target.evidence.append((key, a, b))
    if one_sided_serving:
        causes["serving setup"] = Cause(
            "serving setup",
            *SERVING_UNKNOWN,
            [("serving setup", reference.serving_source, partner.serving_source)],
            note=f"{len(one_sided_serving)} serving settings are known on one side only, so they are not compared",
        )
    causes.update(_code_causes(reference, partner, causes, bool(one_sided_serving)))
    shared = set(reference.settings) & set(partner.settings)
    identical = sum(1 for k in shared if reference.settings[k] == partner.settings[k])
    identical += sum(1 for p in set(reference.code) & set(partner.code) if reference.code[p] == partner.code[p])
    ranked = sorted(causes.values(), key=lambda c: (-c.weight, c.name))
    return Ranking(ranked, identical, cosmetic, measured)


def _code_causes(reference: Record, partner: Record, causes: dict[str, Cause], one_sided: bool) -> dict[str, Cause]:
    """Changed code files: those the serving setup was read from (with what they changed in it),
    and the rest."""
    changed = sorted(
        set(reference.code) ^ set(partner.code)
        | {p for p in set(reference.code) & set(partner.code) if reference.code[p] != partner.code[p]}
    )
    read_into_serving = set(reference.serving_files) | set(partner.serving_files)
    out = {}
    serving_files = [p for p in changed if p in read_into_serving]
    if serving_files:
        differing = sorted(name for name in causes if name.startswith("serving."))
        if one_sided:
            note = "read into the serving setup of one side only"
        elif differing:
            named = ", ".join(differing[:MAX_NAMED_KEYS]) + (
                f" and {len(differing) - MAX_NAMED_KEYS} more" if len(differing) > MAX_NAMED_KEYS else ""
            )
            note = f"the serving setup read from them differs in {named} (ranked above)"
        else:
            note = (
                "the serving setup read from them is the same; they differ in formatting, comments, "
                "file names or harness-only settings"
            )
        out["harness config files"] = Cause(
            "harness config files", *SERVING_FILES, [_code_evidence(reference, partner, p) for p in serving_files], note
        )
    other_files = [p for p in changed if p not in read_into_serving]
    if other_files:
        out["code"] = Cause("code", *CODE, [_code_evidence(reference, partner, p) for p in other_files])
    return out


def _code_evidence(reference: Record, partner: Record, path: str) -> tuple[str, str | None, str | None]:
    return (path, _short(reference.code.get(path)), _short(partner.code.get(path)))


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
