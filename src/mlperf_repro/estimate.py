"""The plan view: jobs, wall time, GPU-hours and disk per stage, estimated from the config
before anything runs (``mlperf-repro plan --configfile X``).

Run lengths follow LoadGen's rules: a performance run lasts until both its minimum
duration and its minimum query count are met (Offline issues one query of
max(min_query_count, 1.1 x min_duration x target_qps) samples), an accuracy run processes
every sample once, a compliance run is a performance run under its audit.config. Every
number that is not a rule of the round is an assumption from the config's ``estimate``
section (defaults in the schema) and is printed with the result. Jobs are counted per
Snakemake rule, so they match the workflow's DAG.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import UserError
from .find_performance import (
    AUTO,
    PROBE_HEADROOM,
    SHORT_RUN_SAMPLE_CONCATENATE_PERMUTATION,
    THROUGHPUT_SCENARIOS,
    chosen_target,
)
from .loadgen_counts import OFFLINE_SLACK, generated_queries
from .plan import MODES, Job, Plan
from .quant.formats import FORMATS, format_for
from .quant.memory import DEFAULT_MEM_MB, checkpoint_tensors, named_tensors

# LoadGen writes each generated token into mlperf_log_accuracy.json as 8 hex characters
# (int32), plus the first token again and the entry's keys.
ACCURACY_LOG_HEX_PER_TOKEN = 8
ACCURACY_LOG_ENTRY_OVERHEAD = 100
# Quantized weights take their format's bytes_per_param (mlperf_repro.quant.formats).
BF16_BYTES_PER_PARAM = 2
# config key under `estimate` -> (unit, what it stands for)
ASSUMPTIONS = {
    "run_overhead_s": ("s", "per LoadGen process: engine start, model load and warm-up"),
    "attach_overhead_s": ("s", "per LoadGen process attaching to a system's shared servers (launch: shared)"),
    "light_job_s": ("s", "per bookkeeping job (user.conf, verification, packaging, check, report)"),
    "builtin_build_s": ("s", "to build and train a builtin demo model"),
    "download_mb_per_s": ("MB/s", "acquisition bandwidth for models and datasets"),
    "quantize_mb_per_s": ("MB/s", "bf16 checkpoint bytes quantized per second"),
    "screen_s": ("s", "per GPU screening job (device enumeration and matmul timing)"),
    "accuracy_eval_samples_per_s": ("samples/s", "accuracy evaluation speed"),
    "dataset_bytes_per_sample": ("bytes", "dataset size per sample (prompt token ids, text, reference)"),
    "log_bytes_per_run": ("bytes", "LoadGen summary, detail log and records per run"),
    "package_bytes_per_result": ("bytes", "submission tree and tarball per result"),
    "light_jobs_side_by_side": ("jobs", "jobs that do not own the machine running at once (a local run)"),
}
# The rules whose jobs own the machine they run on (workflow/rules: threads machine_threads, or
# run_threads with is_measurement); a loadgen_run in performance mode and a compliance_run of a
# test judged on speed as well. Every other job is light: one core locally.
OWNS_MACHINE_RULES = frozenset(
    {"find_performance", "loadgen_repeat", "measurement_pair", "quantize", "scaling_run", "screen_gpus"}
)


@dataclass(frozen=True)
class Assumed:
    """The values of the ``estimate`` section (see ASSUMPTIONS)."""

    run_overhead_s: float
    attach_overhead_s: float
    light_job_s: float
    builtin_build_s: float
    download_mb_per_s: float
    quantize_mb_per_s: float
    screen_s: float
    accuracy_eval_samples_per_s: float
    dataset_bytes_per_sample: float
    log_bytes_per_run: float
    package_bytes_per_result: float
    light_jobs_side_by_side: float


@dataclass
class Assumption:
    key: str
    value: float
    unit: str
    what: str
    source: str

    def line(self) -> str:
        value = int(self.value) if float(self.value).is_integer() else self.value
        return f"{self.what}: {value} {self.unit} ({self.source})"


@dataclass
class Row:
    """One line of the table: a stage, or one scenario x mode of the run stage."""

    stage: str
    jobs: dict[str, int] = field(default_factory=dict)  # rule -> jobs
    wall_s: float = 0.0
    gpu_hours: float = 0.0
    disk_bytes: float = 0.0
    details: list[dict[str, Any]] = field(default_factory=list)

    @property
    def job_count(self) -> int:
        return sum(self.jobs.values())

    def add(
        self,
        rule: str,
        wall_s: float,
        accelerators: int = 0,
        disk_bytes: float = 0.0,
        *,
        job: bool = True,
        **detail: Any,
    ) -> None:
        """``job=False``: a part of a job counted in another row (a measurement pair's audited run)."""
        if job:
            self.jobs[rule] = self.jobs.get(rule, 0) + 1
        self.wall_s += wall_s
        self.gpu_hours += wall_s * accelerators / 3600
        self.disk_bytes += disk_bytes
        self.details.append(
            {
                "rule": rule,
                "wall_s": round(wall_s, 3),
                "accelerators": accelerators,
                "disk_bytes": round(disk_bytes),
                **detail,
            }
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "jobs": self.job_count,
            "rules": dict(self.jobs),
            "wall_s": round(self.wall_s, 3),
            "gpu_hours": round(self.gpu_hours, 4),
            "disk_bytes": round(self.disk_bytes),
            "details": self.details,
        }


@dataclass
class Estimate:
    rows: list[Row]
    assumptions: list[Assumption]
    notes: list[str]

    light_side_by_side: float = 1.0

    @property
    def total(self) -> dict[str, float]:
        """The rows' sums, but the wall time: the jobs that own the machine one after another, the
        light ones ``light_side_by_side`` at a time (each detail's ``owns_machine``)."""
        details = [d for r in self.rows for d in r.details]
        owning = sum(d["wall_s"] for d in details if d.get("owns_machine", True))
        light = sum(d["wall_s"] for d in details if not d.get("owns_machine", True))
        return {
            "jobs": sum(r.job_count for r in self.rows),
            "wall_s": owning + light / self.light_side_by_side,
            "gpu_hours": sum(r.gpu_hours for r in self.rows),
            "disk_bytes": sum(r.disk_bytes for r in self.rows),
        }

    def rule_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            for rule, n in row.jobs.items():
                counts[rule] = counts.get(rule, 0) + n
        return counts

    def to_dict(self) -> dict[str, Any]:
        total = self.total
        return {
            "stages": [r.to_dict() for r in self.rows],
            "total": {
                "jobs": total["jobs"],
                "wall_s": round(total["wall_s"], 3),
                "gpu_hours": round(total["gpu_hours"], 4),
                "disk_bytes": round(total["disk_bytes"]),
            },
            "rules": self.rule_counts(),
            "assumptions": [a.__dict__ for a in self.assumptions],
            "notes": self.notes,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def render(self) -> str:
        header = f"{'stage':<34} {'jobs':>5} {'wall time':>11} {'GPU-hours':>10} {'disk':>10}"
        lines = [header, "-" * len(header)]
        for row in self.rows:
            lines.append(
                f"{row.stage:<34} {row.job_count:>5} {format_duration(row.wall_s):>11} "
                f"{row.gpu_hours:>10.2f} {format_bytes(row.disk_bytes):>10}"
            )
        total = self.total
        lines.append("-" * len(header))
        lines.append(
            f"{'total':<34} {total['jobs']:>5} {format_duration(total['wall_s']):>11} "
            f"{total['gpu_hours']:>10.2f} {format_bytes(total['disk_bytes']):>10}"
        )
        lines.append("")
        lines.append("Assumptions:")
        lines += [f"  - {a.line()}" for a in self.assumptions]
        lines += [f"  - {note}" for note in self.notes]
        return "\n".join(lines) + "\n"


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def format_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def bundle_note(size: Any) -> str:
    """The plan view's line for an offline bundle's size (a :class:`mlperf_repro.bundle.size.BundleSize`)."""
    shown = ", ".join(size.unknown[:6]) + (f" and {len(size.unknown) - 6} more" if len(size.unknown) > 6 else "")
    return (
        f"offline bundle (mlperf-repro bundle, docs/offline.md): about {format_bytes(size.total)}: wheels "
        f"{format_bytes(size.wheels)} ({size.packages} packages), artifacts {format_bytes(size.artifacts)}"
        + (f"; not counted (fetched from a remote source): {shown}" if size.unknown else "")
    )


class Estimator:
    def __init__(self, config: dict[str, Any], set_keys: set[str] | None = None) -> None:
        """``config`` is validated (schema defaults filled); ``set_keys`` are the ``estimate``
        keys the user's file sets (the rest are the schema's defaults)."""
        self.plan = Plan(config)
        self.config = config
        section = config.get("estimate")
        if not isinstance(section, dict) or any(k not in section for k in ASSUMPTIONS):
            raise UserError(
                "estimate: the config was not validated (schema defaults missing); "
                "load it through mlperf_repro.config.validate_config"
            )
        self.values = {k: float(section[k]) for k in ASSUMPTIONS}
        self._servers_started: set[str] = set()  # launch: shared systems whose first run is priced
        self.assume = Assumed(**self.values)
        set_keys = set(section) if set_keys is None else set_keys
        self.assumptions = [
            Assumption(
                k,
                self.values[k],
                unit,
                what,
                f"config key estimate.{k}" if k in set_keys else f"default of estimate.{k}",
            )
            for k, (unit, what) in ASSUMPTIONS.items()
        ]

    def overhead(self, system: str) -> float:
        """What a LoadGen process of ``system`` costs besides its test: a model load; with
        launch: shared only the first one loads (it starts the servers), the rest attach."""
        if not self.plan.shares_servers(system):
            return self.assume.run_overhead_s
        if system in self._servers_started:
            return self.assume.attach_overhead_s
        self._servers_started.add(system)
        return self.assume.run_overhead_s

    def model_load_notes(self, rows: list[Row]) -> list[str]:
        """Per system, the model loads of its LoadGen processes, and what launch: shared saves
        (or would save: one load per system instead of one per process)."""
        loading = ("loadgen_run", "loadgen_repeat", "compliance_run", "measurement_pair", "find_performance")
        notes = []
        for system in self.plan.systems:
            processes = 0
            for row in rows:
                for detail in row.details:
                    if detail["rule"] in loading and detail.get("system") == system:
                        processes += detail.get("loadgen_runs", 1)
            if processes < 2:
                continue
            saved_s = (processes - 1) * (self.assume.run_overhead_s - self.assume.attach_overhead_s)
            if saved_s <= 0:
                continue
            gpu_h = saved_s * self.plan.system_accelerators(system) / 3600
            saving = f"{format_duration(saved_s)} and {gpu_h:.2f} GPU-hours"
            if self.plan.shares_servers(system):
                notes.append(
                    f"model loads of {system}: 1 for its {processes} LoadGen processes "
                    f"(launch: {self.plan.shared_launch(system)}); "
                    f"saves {saving} against a load per process"
                )
            elif self.plan.engine(system)["backend"] == "diffusers":
                notes.append(
                    f"model loads of {system}: {processes} (one per LoadGen process); its video server started "
                    f"once per workflow run (engine.launch: shared) would save {saving}"
                )
            else:
                notes.append(
                    f"model loads of {system}: {processes} (one per LoadGen process); servers started once "
                    f"per workflow run (launch: shared on one host, slurm-shared on a SLURM cluster) would save {saving}"
                )
        return notes

    # -- facts ---------------------------------------------------------------------------
    def model_facts(self, model: str) -> list[dict[str, Any]]:
        """The rules table's facts of the benchmarks that serve ``model`` (those the plan runs,
        else any benchmark entry that names it)."""
        benchmarks = [b for b in self.plan.benchmarks if self.plan.benchmark_cfg(b)["model"] == model]
        if not benchmarks:
            benchmarks = [b for b, cfg in self.config["benchmarks"].items() if cfg["model"] == model]
        return [self.plan.facts(b).facts for b in benchmarks]

    def model_sizes(self, model: str) -> dict[str, float]:
        """Parameters (total, in quantizable linear layers) and bf16 checkpoint bytes."""
        entry = self.config["models"][model]
        if entry["source"] in ("builtin:tiny-llama", "builtin:tiny-gpt-oss"):
            arch = entry.get("builtin") or {}
            from .demo.model import DemoModelSpec

            spec = DemoModelSpec(**{k: v for k, v in arch.items() if k in DemoModelSpec.__dataclass_fields__})
            hidden, inter, layers = spec.hidden_size, spec.intermediate_size, spec.num_hidden_layers
            head_dim = hidden // spec.num_attention_heads
            kv = spec.num_key_value_heads * head_dim
            linear = layers * (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * inter)
            # Untied embeddings and lm_head; two RMSNorms per layer and a final one.
            total = linear + 2 * spec.vocab_size * hidden + (2 * layers + 1) * hidden
            return {
                "parameters": total,
                "linear": linear,
                "bytes": total * BF16_BYTES_PER_PARAM,
                "source": f"models.{model}.builtin architecture (vocab_size is an upper bound)",
            }
        local = self.plan.local_checkpoint(model)
        tensors = named_tensors(local) if local else []
        if tensors:
            # Linear layers: the 2-D weights but the embeddings and the LM head, as for a builtin.
            linear = sum(
                elements
                for name, shape, elements, _ in tensors
                if len(shape) == 2 and "embed" not in name and "lm_head" not in name
            )
            return {
                "parameters": sum(elements for _, _, elements, _ in tensors),
                "linear": linear,
                "bytes": sum(p.stat().st_size for p in local.rglob("*") if p.is_file()),
                "source": f"models.{model}.source {local} (safetensors headers)",
            }
        facts = self.model_facts(model)
        if not facts or not any("model_bytes" in f for f in facts):
            raise UserError(
                f"models.{model}: no size is known for it (the rules table has model_bytes only for "
                f"the round's benchmarks; use it in a benchmark)"
            )
        chosen = max(facts, key=lambda f: f.get("model_bytes", 0))
        params = chosen.get("parameters") or {}
        size = float(chosen["model_bytes"])
        total = params.get("total", size / BF16_BYTES_PER_PARAM)
        return {
            "parameters": total,
            "linear": params.get("linear", total),
            "bytes": size,
            "source": f"rules table {self.plan.rules.name}: model_bytes"
            + (", parameters" if params else "; parameters taken as model_bytes / 2 (bf16), all quantizable"),
        }

    def quantize_memory(self, model: str, recipe: str) -> dict[str, Any]:
        """The quantize job's memory (``mem_mb``, what the rule asks for:
        mlperf_repro.quant.memory.job_mem_mb, by the recipe's tool), from the builtin
        architecture, the acquired checkpoint's headers, or else the rules table's model size."""
        from .quant.memory import autosmoothquant_cache_bytes, calibration_tokens, checkpoint_widths, job_mem_mb

        settings = self.config["quantization"][recipe]
        tool = settings.get("tool")
        on_gpu = self.plan.quantize_device(recipe)["device"] == "gpu"
        tokens = calibration_tokens(settings) if tool == "quark" else 0

        def cache(folder: Any) -> tuple[float, str]:
            """AutoSmoothQuant's activation cache, from the checkpoint's widths or the rules table's."""
            if not tokens:
                return 0, ""
            widths = checkpoint_widths(folder) if folder else None
            where = "config.json"
            if widths is None:
                known = [f["widths"] for f in self.model_facts(model) if f.get("widths")]
                widths = (known[0]["hidden"], known[0]["intermediate"]) if known else None
                where = f"rules table {self.plan.rules.name}: widths"
            if widths is None:
                return 0, "; AutoSmoothQuant's activation cache not counted (no widths known)"
            return autosmoothquant_cache_bytes(tokens, *widths), f"; {tokens:,} calibration tokens, widths from {where}"

        entry = self.config["models"][model]
        if entry["source"] in ("builtin:tiny-llama", "builtin:tiny-gpt-oss"):
            from .demo.model import DemoModelSpec

            arch = entry.get("builtin") or {}
            spec = DemoModelSpec(**{k: v for k, v in arch.items() if k in DemoModelSpec.__dataclass_fields__})
            h = spec.hidden_size
            largest = max(spec.vocab_size * h, spec.intermediate_size * h, h * h) * BF16_BYTES_PER_PARAM
            mem_mb, why = job_mem_mb(largest, self.model_sizes(model)["parameters"], tool=tool)
            return {"mem_mb": mem_mb, "mem_from": f"{why}, builtin architecture"}
        # A file:// source's own folder first: the same figure before and after acquisition.
        local = self.plan.local_checkpoint(model)
        for folder, what in (
            (local, "checkpoint at its file:// source"),
            (self.plan.model_dir(model), "acquired checkpoint"),
        ):
            tensors = checkpoint_tensors(folder) if folder else []
            if tensors:
                activations, cache_from = cache(folder)
                mem_mb, why = job_mem_mb(
                    max(b for _, b in tensors),
                    sum(e for e, _ in tensors),
                    tool=tool,
                    activation_cache_bytes=activations,
                    on_gpu=on_gpu,
                )
                return {"mem_mb": mem_mb, "mem_from": f"{why}, {what}{cache_from}"}
        if tool == "quark":  # its need is the model's size, which the rules table gives
            sizes = self.model_sizes(model)
            activations, cache_from = cache(None)
            mem_mb, why = job_mem_mb(
                0, sizes["parameters"], tool=tool, activation_cache_bytes=activations, on_gpu=on_gpu
            )
            return {"mem_mb": mem_mb, "mem_from": f"{why}, {sizes['source']}{cache_from}"}
        return {"mem_mb": DEFAULT_MEM_MB, "mem_from": "rule default until the checkpoint is acquired"}

    def quantized_bytes(self, model: str, recipe: str) -> float:
        """The quantized checkpoint: the linear layers in the recipe's format, the rest bf16."""
        sizes = self.model_sizes(model)
        rest = sizes["parameters"] - sizes["linear"]
        fmt = format_for(self.config["quantization"][recipe]["scheme"])
        return sizes["linear"] * fmt.bytes_per_param + rest * BF16_BYTES_PER_PARAM

    def output_tokens(self, benchmark: str, mode: str) -> float:
        """Tokens per answer for log sizes: the reference mean where the table has it, else the cap."""
        facts = self.plan.facts(benchmark)
        reference = facts.accuracy.get("reference", {}).get("tokens_per_sample")
        if reference:
            return float(reference)
        return float(self.plan.max_new_tokens(benchmark, mode) or 1)

    def accuracy_log_bytes(self, benchmark: str, samples: float, mode: str) -> float:
        response_bytes = self.plan.facts(benchmark).facts.get("response_bytes")
        if response_bytes:  # a file per sample (text-to-video: an mp4), logged as hex
            return samples * (ACCURACY_LOG_ENTRY_OVERHEAD + 2 * float(response_bytes))
        per_sample = ACCURACY_LOG_ENTRY_OVERHEAD + ACCURACY_LOG_HEX_PER_TOKEN * (
            self.output_tokens(benchmark, mode) + 1
        )
        return samples * per_sample

    # -- run lengths (LoadGen rules) ------------------------------------------------------
    def performance_run(
        self,
        settings: dict[str, Any],
        scenario: str,
        benchmark: str,
        audit: dict[str, Any] | None = None,
        rate: float | None = None,
    ) -> dict[str, float]:
        """Queries (samples, for Offline) and seconds of one performance run; ``rate``: the
        samples/s the machine runs Offline and SingleStream at, where it is not target_qps
        (target_qps auto: the pass's target lies a margin above the measured rate)."""
        rules = self.plan.rules
        facts = self.plan.facts(benchmark).facts
        settings = dict(settings)
        if audit:
            for key in ("min_duration", "min_query_count", "sample_concatenate_permutation"):
                if key in audit:
                    settings[key] = audit[key]
        qps = float(settings["target_qps"])
        duration_s = float(settings.get("min_duration", rules.min_duration_ms)) / 1000
        if scenario == "Offline":
            # user.conf, else LoadGen's mlperf.conf value, else the checker's Offline minimum.
            minimum = float(
                settings.get(
                    "min_query_count",
                    (facts.get("mlperf_conf_min_query_count") or {}).get(
                        "Offline", facts["offline_min_samples_per_query"]
                    ),
                )
            )
        else:
            # Server/Interactive: Poisson arrivals at target_qps; SingleStream: back to back at
            # 1/target_qps each. Either way the run ends once both minimums are met.
            # LoadGen's default, not the table's min_query_count (gpt-oss Server: 270,336): the
            # checker applies that only to runs without early stopping, and Server runs stop
            # early (published gpt-oss Server logs: effective_min_query_count 100).
            minimum = float(settings.get("min_query_count", rules["default_min_query_count"]))
        # The round's sample_concatenate_permutation (mlperf.conf) pads the run to whole passes
        # over the loaded performance samples, unless user.conf or the audit turns it off.
        queries = generated_queries(
            self.plan.loadgen_scenario(scenario),
            min_duration_s=duration_s,
            target_qps=qps,
            min_query_count=minimum,
            loaded_samples=int(settings.get("performance_sample_count_override") or facts["performance_sample_count"]),
            concatenate=bool(
                settings.get("sample_concatenate_permutation", facts.get("sample_concatenate_permutation"))
            ),
        )
        if settings.get("max_query_count"):
            queries = min(queries, float(settings["max_query_count"]))
        seconds = queries / (rate if rate and scenario in THROUGHPUT_SCENARIOS else qps)
        if settings.get("max_duration"):
            seconds = min(seconds, float(settings["max_duration"]) / 1000)
        return {
            "queries": queries,
            "seconds": seconds,
            "target_qps": qps,
            "min_duration_s": duration_s,
            "min_query_count": minimum,
        }

    # -- target_qps: auto ---------------------------------------------------------------------
    def expected_rate(self, system: str, benchmark: str, scenario: str) -> float | None:
        """The rate a scenario is planned at: its target_qps, or with target_qps auto its
        start_qps (what the pass is expected to measure); None where neither is known."""
        target = self.plan.scenario_cfg(system, benchmark, scenario)["target_qps"]
        if target != AUTO:
            return float(target)
        start = self.plan.scenario_cfg(system, benchmark, scenario).get("start_qps")
        return float(start) if start else None

    def planned_run(
        self, job: Job, settings: dict[str, Any], audit: dict[str, Any] | None = None, share: float = 1.0
    ) -> dict[str, float | None]:
        """A performance run of a scenario, its target_qps auto included: at the target the
        pass would choose from start_qps, else (no rate known) the length min_duration alone
        fixes, queries unknown. ``share``: a scaling study's n of N endpoints (a number target
        in ``settings`` is scaled already)."""
        if settings["target_qps"] != AUTO:
            return self.performance_run(settings, job.scenario, job.benchmark, audit)
        rate = self.expected_rate(job.system, job.benchmark, job.scenario)
        margin = float(self.plan.find_performance_settings["margin"])
        if rate is not None:
            target = chosen_target(job.scenario, rate, margin) * share
            settings = {**settings, "target_qps": target}
            return self.performance_run(settings, job.scenario, job.benchmark, audit, rate * share)
        settings = {**settings, **{k: audit[k] for k in ("min_duration", "min_query_count") if k in (audit or {})}}
        duration_s = float(settings.get("min_duration", self.plan.rules.min_duration_ms)) / 1000
        # A target a margin above the machine's rate: Offline issues 1.1 x min_duration x target.
        stretch = {"Offline": OFFLINE_SLACK * (1 + margin), "SingleStream": 1 + margin}.get(job.scenario, 1.0)
        return {"queries": None, "seconds": stretch * duration_s, "target_qps": None, "min_duration_s": duration_s}

    def find_performance(self) -> Row:
        """The find-performance passes of the target_qps auto scenarios, whatever the performance
        sample count (the short runs turn sample_concatenate_permutation off): Offline one short
        run from start_qps (asking PROBE_HEADROOM x it, 1.1 x that x min_duration samples done at
        start_qps), SingleStream one of min_duration, up to max_steps climbing from a low rate
        without one; Server and Interactive up to max_steps (the bisection's bound) of
        max(min_duration, min_query_count / start_qps) each."""
        plan = self.plan
        row = Row("find performance")
        for job in plan.find_performance_jobs:
            request = plan.find_performance_request(job.system, job.benchmark, job.scenario)
            short_s = request["min_duration_ms"] / 1000
            start = request["start_qps"]
            if start is None and plan.search_start(job.system, job.benchmark, job.scenario)[2]:
                # It starts from the Offline pass's measurement: that pass's own start stands in.
                start = self.expected_rate(job.system, job.benchmark, "Offline")
            if job.scenario in THROUGHPUT_SCENARIOS:
                runs = 1 if request["start_qps"] else request["max_steps"]
                # It asks PROBE_HEADROOM x start, one query at least; the machine runs at start.
                asked, minimum = PROBE_HEADROOM * (start or 0.0), 1
            else:
                runs = request["max_steps"]
                asked, minimum = start, request["min_query_count"]
            if start:
                queries = generated_queries(
                    plan.loadgen_scenario(job.scenario),
                    min_duration_s=short_s,
                    target_qps=asked,
                    min_query_count=minimum,
                    concatenate=bool(SHORT_RUN_SAMPLE_CONCATENATE_PERMUTATION),
                )
                # SingleStream ends once min_duration is met, however many queries it generated.
                per_run = short_s if job.scenario == "SingleStream" else queries / start
            else:
                per_run = short_s
            row.add(
                "find_performance",
                runs * (per_run + self.overhead(job.system)),
                self.plan.system_accelerators(job.system),
                runs * self.assume.log_bytes_per_run,
                system=job.system,
                benchmark=job.benchmark,
                scenario=job.scenario,
                loadgen_runs=runs,
                loadgen_runs_are="expected" if runs == 1 else "at most",
                short_run_seconds=round(per_run, 3),
                start_qps=start,
                start_from=request["start_from"],
                nodes=plan.server_nodes(job.system),
            )
        return row

    def auto_target_notes(self) -> list[str]:
        """What the plan view cannot know of target_qps auto, said plainly."""
        notes = []
        priced, unknown = [], []
        for job in self.plan.find_performance_jobs:
            where = f"systems.{job.system}.benchmarks.{job.benchmark}.{job.scenario}"
            (priced if self.expected_rate(job.system, job.benchmark, job.scenario) else unknown).append(where)
        margin = self.plan.find_performance_settings["margin"]
        if priced:
            notes.append(
                "target_qps auto is unknown until measured; priced at start_qps as the rate the pass finds, "
                f"target start_qps x (1 + {margin}) for Offline/SingleStream, x (1 - {margin}) for "
                f"Server/Interactive: {', '.join(priced)}"
            )
        if unknown:
            notes.append(
                "target_qps auto without start_qps: no rate is known until measured, so the performance "
                "and compliance runs are priced at the length min_duration alone fixes (Offline "
                f"1.1 x (1 + {margin}) x min_duration), and the accuracy runs' time and the min_query_count "
                f"bounds are not counted; set start_qps to price them: {', '.join(unknown)}"
            )
        return notes

    # -- stages ----------------------------------------------------------------------------
    def acquire(self) -> Row:
        row = Row("acquire")
        plan = self.plan
        models = list(
            dict.fromkeys(
                [plan.benchmark_cfg(b)["model"] for b in plan.benchmarks]
                + [
                    (self.config["datasets"][plan.benchmark_cfg(b)["dataset"]].get("builtin") or {}).get("model")
                    for b in plan.benchmarks
                ]
            )
        )
        for model in [m for m in models if m]:
            sizes = self.model_sizes(model)
            builtin = self.config["models"][model]["source"].startswith("builtin:")
            wall = self.assume.builtin_build_s if builtin else sizes["bytes"] / (self.assume.download_mb_per_s * 1e6)
            row.add(
                "acquire_model",
                wall,
                disk_bytes=sizes["bytes"],
                model=model,
                parameters=sizes["parameters"],
                size_from=sizes["source"],
            )
        # A tool: prequantized recipe's published checkpoint is a models entry of its own,
        # acquired beside the benchmark's model: sized at the recipe format's bytes.
        recipes = self.config.get("quantization") or {}
        checkpoints = {
            recipes[name]["checkpoint"]: (plan.benchmark_cfg(b)["model"], name)
            for b in plan.benchmarks
            if (name := plan.benchmark_cfg(b).get("quantization")) and recipes[name].get("tool") == "prequantized"
        }
        for checkpoint, (model, recipe) in checkpoints.items():
            size = self.quantized_bytes(model, recipe)
            row.add(
                "acquire_model",
                size / (self.assume.download_mb_per_s * 1e6),
                disk_bytes=size,
                model=checkpoint,
                size_from=f"models.{model} at quantization.{recipe}'s format size",
            )
        for dataset in dict.fromkeys(plan.benchmark_cfg(b)["dataset"] for b in plan.benchmarks):
            benchmark = next(b for b in plan.benchmarks if plan.benchmark_cfg(b)["dataset"] == dataset)
            samples = plan.dataset_samples(benchmark)
            size = samples * self.assume.dataset_bytes_per_sample
            builtin = self.config["datasets"][dataset]["source"].startswith("builtin:")
            wall = self.assume.light_job_s if builtin else size / (self.assume.download_mb_per_s * 1e6)
            row.add("acquire_dataset", wall, disk_bytes=size, dataset=dataset, samples=samples)
        # A set the evaluation reads besides the benchmark's (gpt-oss: its LiveCodeBench release).
        benchmark_datasets = {plan.benchmark_cfg(b)["dataset"] for b in plan.benchmarks}
        extra = {entry for b in plan.benchmarks for entry in plan.accuracy_dataset_entries(b)}
        for dataset in sorted(extra - benchmark_datasets):
            benchmark_datasets.add(dataset)
            row.add(
                "acquire_dataset",
                self.assume.light_job_s,
                disk_bytes=0,
                dataset=dataset,
                size_from="not known before acquisition (the accuracy evaluation's LiveCodeBench release)",
            )
        # A calibration set no benchmark runs on (quantization.<recipe>.calibration.dataset).
        for model, recipe in plan.quantized_models:
            source = plan.calibration_source(model, recipe)
            if source is None or source[0] in benchmark_datasets:
                continue
            benchmark_datasets.add(source[0])
            samples = (self.config["quantization"][recipe].get("calibration") or {}).get("samples", 32)
            size = samples * self.assume.dataset_bytes_per_sample
            builtin = self.config["datasets"][source[0]]["source"].startswith("builtin:")
            wall = self.assume.light_job_s if builtin else size / (self.assume.download_mb_per_s * 1e6)
            row.add("acquire_dataset", wall, disk_bytes=size, dataset=source[0], samples=samples, calibration=recipe)
        return row

    def quantize(self) -> Row:
        row = Row("quantize")
        for model, recipe in self.plan.quantized_models:
            if not any(self.plan.benchmark_cfg(b)["model"] == model for b in self.plan.benchmarks):
                continue
            sizes = self.model_sizes(model)
            fp4 = self.quantized_bytes(model, recipe)
            # The rule writes the FP4 checkpoint and its dequantized bf16 copy (served on CPU).
            device = self.plan.quantize_device(recipe)
            row.add(
                "quantize",
                sizes["bytes"] / (self.assume.quantize_mb_per_s * 1e6),
                device["gpus"],
                disk_bytes=fp4 + sizes["bytes"],
                device=device["device"],
                model=model,
                recipe=recipe,
                fp4_bytes=round(fp4),
                emulated_bytes=round(sizes["bytes"]),
                **self.quantize_memory(model, recipe),
            )
        return row

    def screen(self) -> Row:
        row = Row("screen GPUs")
        for system in self.plan.systems:
            if self.plan.screening(system):
                row.add("screen_gpus", self.assume.screen_s, self.plan.system_accelerators(system), system=system)
        return row

    def runs(self) -> list[Row]:
        plan = self.plan
        confs = Row("run: user.conf")
        rows: dict[tuple[str, str], Row] = {}
        for job in plan.jobs:
            confs.add(
                "user_conf", self.assume.light_job_s, system=job.system, benchmark=job.benchmark, scenario=job.scenario
            )
            settings = plan.user_conf_settings(job.system, job.benchmark, job.scenario)
            accelerators = self.plan.system_accelerators(job.system)
            for mode in MODES:
                row = rows.setdefault((job.scenario, mode), Row(f"run: {job.scenario} {mode}"))
                where = {"system": job.system, "benchmark": job.benchmark, "scenario": job.scenario, "mode": mode}
                if mode == "performance":
                    run = self.planned_run(job, settings)
                    logs = self.assume.log_bytes_per_run
                else:
                    samples = plan.accuracy_samples(job.benchmark)
                    qps = self.expected_rate(job.system, job.benchmark, job.scenario)
                    run = {"queries": samples, "seconds": samples / qps if qps else 0.0, "target_qps": qps}
                    logs = self.assume.log_bytes_per_run + self.accuracy_log_bytes(job.benchmark, samples, mode)
                # A paired test's performance run (the packaged repeat) is the first part of its
                # measurement pair.
                pair_repeat = (
                    plan.packaged_repeat(job.system, job.benchmark, job.scenario)
                    if plan.paired_test(job.benchmark)
                    else None
                )
                paired = mode == "performance" and pair_repeat == 1
                row.add(
                    "measurement_pair" if paired else "loadgen_run",
                    run["seconds"] + self.overhead(job.system),
                    accelerators,
                    logs,
                    **where,
                    **_run_details(run),
                    **({"part": "performance run"} if paired else {}),
                    nodes=plan.server_nodes(job.system),
                )
                if mode == "performance":
                    # repeats: N - the performance test N - 1 more times, each its own process.
                    for repeat in range(2, plan.repeats(job.system, job.benchmark, job.scenario) + 1):
                        row.add(
                            "measurement_pair" if repeat == pair_repeat else "loadgen_repeat",
                            run["seconds"] + self.overhead(job.system),
                            accelerators,
                            logs,
                            **where,
                            repeat=repeat,
                            **_run_details(run),
                            nodes=plan.server_nodes(job.system),
                        )
        return [confs] + [
            rows[key] for key in sorted(rows, key=lambda k: (plan.scenarios.index(k[0]), MODES.index(k[1])))
        ]

    def accuracy(self) -> Row:
        plan = self.plan
        row = Row("accuracy")
        for system, benchmark in plan.system_benchmarks():
            if plan.needs_reference_accuracy(benchmark):
                scenarios = plan.system_cfg(system)["benchmarks"][benchmark]
                scenario = "Offline" if "Offline" in scenarios else next(iter(scenarios))
                qps = self.expected_rate(system, benchmark, scenario)
                samples = plan.accuracy_samples(benchmark)
                row.add(
                    "reference_accuracy",
                    (samples / qps if qps else 0.0) + self.assume.run_overhead_s,
                    self.plan.system_accelerators(system),
                    system=system,
                    benchmark=benchmark,
                    samples=samples,
                    throughput_from=scenario,
                )
        for job in plan.jobs:
            samples = plan.accuracy_samples(job.benchmark)
            row.add(
                "accuracy_eval",
                self.assume.light_job_s + samples / self.assume.accuracy_eval_samples_per_s,
                system=job.system,
                benchmark=job.benchmark,
                scenario=job.scenario,
                samples=samples,
            )
        return row

    def compliance(self) -> Row:
        plan = self.plan
        row = Row("compliance")
        for job, test in plan.compliance_jobs:
            audit = plan.compliance_test(test, job.benchmark)["audit_config"]
            settings = plan.user_conf_settings(job.system, job.benchmark, job.scenario)
            run = self.planned_run(job, settings, audit)
            logged = min(
                run["queries"] if run["queries"] is not None else float("inf"),
                float(audit.get("accuracy_log_sampling_target", 0)),
            )
            logs = self.assume.log_bytes_per_run + self.accuracy_log_bytes(job.benchmark, logged, "performance")
            where = {"system": job.system, "benchmark": job.benchmark, "scenario": job.scenario, "test": test}
            # The paired test's run is the second part of the measurement pair (counted as a
            # job in its performance row).
            paired = test == plan.paired_test(job.benchmark)
            row.add(
                "measurement_pair" if paired else "compliance_run",
                run["seconds"] + self.overhead(job.system),
                self.plan.system_accelerators(job.system),
                logs,
                job=not paired,
                **where,
                **_run_details(run),
                **({"part": f"{test} run"} if paired else {}),
                nodes=plan.server_nodes(job.system),
            )
            row.add("compliance_verify", self.assume.light_job_s, **where)
        return row

    def package(self) -> Row:
        row = Row("package, check, report")
        results = len(self.plan.jobs)
        row.add(
            "package",
            self.assume.light_job_s,
            disk_bytes=results * self.assume.package_bytes_per_result,
            results=results,
        )
        for rule in ("tarball", "check_submission", "summary", "official_summary", "report_plots"):
            row.add(rule, self.assume.light_job_s)
        if self.config.get("compare"):
            row.add("compare", self.assume.light_job_s)
        return row

    def scaling(self) -> Row:
        plan = self.plan
        row = Row("scaling study")
        study = plan.scaling
        if not study:
            return row
        system, benchmark = study["system"], study["benchmark"]
        for scenario, count in plan.scaling_jobs():
            settings = plan.scaling_user_conf_settings(system, benchmark, scenario, count)
            # target_qps auto: the found target scaled to n of N endpoints, as scaling_user_conf writes it.
            run = self.planned_run(Job(system, benchmark, scenario), settings, share=plan.scaling_share(system, count))
            where = {"system": system, "benchmark": benchmark, "scenario": scenario, "endpoints": count}
            row.add("scaling_user_conf", self.assume.light_job_s, **where)
            row.add(
                "scaling_run",
                run["seconds"] + self.assume.run_overhead_s,
                self.plan.endpoint_accelerators(system, count),
                self.assume.log_bytes_per_run,
                **where,
                **_run_details(run),
                nodes=plan.server_nodes(system, count),
            )
        row.add("scaling_report", self.assume.light_job_s, system=system, benchmark=benchmark)
        return row

    def size_notes(self) -> str:
        """The size per parameter of the formats the plan quantizes to (all registered ones when none)."""
        recipes = self.config.get("quantization") or {}
        used = [format_for(recipes[recipe]["scheme"]) for _, recipe in self.plan.quantized_models]
        notes = [fmt.size_note for fmt in used or FORMATS.values()]
        return "; ".join(dict.fromkeys(notes))

    def estimate(self) -> Estimate:
        self._servers_started = set()
        rows = [
            self.acquire(),
            self.quantize(),
            self.screen(),
            self.find_performance(),
            *self.runs(),
            self.accuracy(),
            self.compliance(),
            self.package(),
            self.scaling(),
        ]
        rows = [r for r in rows if r.job_count]
        notes = [
            "run lengths: Offline issues max(min_query_count, 1.1 x min_duration x target_qps) samples at "
            "target_qps; Server/Interactive/SingleStream run max(min_duration, min_query_count / target_qps); "
            "where the round sets sample_concatenate_permutation (mlperf.conf), LoadGen pads both up to a "
            "multiple of the performance sample count (SingleStream: above 2 x min_duration x target_qps); "
            "find-performance short runs turn it off and last min_duration (Offline 1.1 x 1.5 x it), whatever "
            "the sample count, plus the drain of an overloaded Server/Interactive run; "
            "accuracy runs process every dataset sample at target_qps; compliance runs apply their audit.config "
            f"(rules table {self.plan.rules.name})",
            "GPU-hours: wall time x every accelerator of the system (accelerators_per_node x number_of_nodes, "
            "or the endpoints' accelerators) for the jobs that occupy it",
            f"disk: bf16 = 2 bytes per parameter; {self.size_notes()}, the rest (embeddings, lm_head, norms) "
            "bf16; quantize also writes the dequantized bf16 copy",
            "accuracy logs: 8 hex characters per token (the reference tokens_per_sample where the rules table "
            "has it, else max_new_tokens) + 100 bytes per sample; a benchmark whose responses are files "
            "(text-to-video) 2 hex characters per byte of the rules table's response_bytes",
            "wall time total: the jobs that own the machine (measurements, quantization) one after another, the "
            f"light ones (accuracy and output-checking runs, scoring, bookkeeping: one core each locally) "
            f"{self.assume.light_jobs_side_by_side:g} at a time (estimate.light_jobs_side_by_side); on a cluster, "
            "systems overlap, so this is an upper bound there",
        ]
        if self.plan.test_scale:
            notes.append("test_scale is enabled: run lengths use its shortened minimums")
        if self.plan.pair_jobs:
            notes.append(
                "measurement pairs (a performance run and the test judged against it, TEST04): priced as measured "
                "once; a pair whose runs are both VALID but whose ratio breaks the limit by less than the noise "
                f"ceiling is measured again, up to {self.plan.compliance_settings['measurement_attempts']} times in "
                "all (compliance section)"
            )
        repeated = self.plan.repeat_jobs
        if repeated:
            notes.append(
                f"repeats: {len(repeated)} extra performance run(s) (rule loadgen_repeat), each as long as "
                "its scenario's performance run, in the run rows"
            )
        notes += self.auto_target_notes()
        notes += self.model_load_notes(rows)
        for row in rows:
            for detail in row.details:
                detail["owns_machine"] = self.owns_machine(detail)
        return Estimate(rows, self.assumptions, notes, self.assume.light_jobs_side_by_side)

    def owns_machine(self, detail: dict[str, Any]) -> bool:
        """Whether a job takes every core of a local run (OWNS_MACHINE_RULES)."""
        rule = detail["rule"]
        if rule == "loadgen_run":
            return detail.get("mode") == "performance"
        if rule == "compliance_run":
            return self.plan.compliance_judges_speed(detail["test"], detail["benchmark"])
        return rule in OWNS_MACHINE_RULES


def _run_details(run: dict[str, Any]) -> dict[str, Any]:
    """A run's queries and test seconds for the details (queries None: unknown until measured)."""
    queries = run["queries"]
    return {
        "queries": round(queries, 3) if queries is not None else None,
        "test_seconds": round(run["seconds"], 3),
    }


def estimate_plan(config: dict[str, Any], set_keys: set[str] | None = None) -> Estimate:
    return Estimator(config, set_keys).estimate()


def estimate_file(config_path: str, schema_path: str) -> Estimate:
    """Load, validate and estimate one config file (UserError on any problem)."""
    import copy

    from .config import load_yaml, validate_config

    raw = load_yaml(config_path)
    if not isinstance(raw, dict):
        raise UserError(f"config file {config_path} must hold a mapping of keys (see config/README.md)")
    set_keys = set((raw.get("estimate") or {}) if isinstance(raw.get("estimate"), dict) else {})
    from .launch import LAUNCHERS

    config = validate_config(copy.deepcopy(raw), schema_path, launchers=LAUNCHERS)
    return estimate_plan(config, set_keys)
