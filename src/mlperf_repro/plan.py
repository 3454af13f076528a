"""What the workflow will produce, derived from the validated config.

The Snakefile asks this module for wildcard values, file paths and per-job parameters,
so the rules stay declarative and every decision here is unit-testable without Snakemake.
Paths are relative to the workflow's working directory.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .benchmarks import Benchmark, Round, load_round
from .errors import UserError
from .find_performance import AUTO, LATENCY_SCENARIOS
from .find_performance import DEFAULTS as FIND_PERFORMANCE_DEFAULTS
from .generation import GenerationSettings
from .harmony import VOCAB_ENV as HARMONY_VOCAB_ENV
from .paths import PATHS, path
from .userconf import user_conf_from_request, user_conf_settings

MODES = ("performance", "accuracy")
# The config sections that shape the submission tree (its config_used.yaml included). The
# others (`compare`, `estimate`, `scaling_study`, `find_performance`) make other outputs: editing
# them reruns those, not the package (the find-performance pass's outcome reaches the tree
# through the user.conf files it changes).
SUBMISSION_SECTIONS = (
    "round",
    "submitter",
    "division",
    "test_scale",
    "package",
    "models",
    "datasets",
    "quantization",
    "benchmarks",
    "systems",
)
COMPLIANCE_TEST_PATTERN = r"TEST\d\d"
# The compliance section's defaults (the schema's, for configs read without it).
COMPLIANCE_DEFAULTS = {"measurement_attempts": 3, "noise_ceiling": 1.5}


@dataclass(frozen=True)
class Job:
    system: str
    benchmark: str
    scenario: str


class Plan:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    # -- basics --------------------------------------------------------------------
    @cached_property
    def rules(self) -> Round:
        return load_round(self.config["round"])

    @property
    def division(self) -> str:
        return self.config["division"]

    @property
    def submitter(self) -> str:
        return self.config["submitter"]

    @property
    def test_scale(self) -> dict[str, Any] | None:
        scale = self.config.get("test_scale") or {}
        return scale if scale.get("enabled") else None

    @property
    def submittable(self) -> bool:
        return self.test_scale is None

    def submission_config(self) -> dict[str, Any]:
        """What the package and summary jobs read, handed to them as a param so that Snakemake
        reruns them exactly when it changes (a job that read the whole config hides its inputs)."""
        return {key: self.config[key] for key in SUBMISSION_SECTIONS if key in self.config}

    def benchmark_cfg(self, benchmark: str) -> dict[str, Any]:
        return self.config["benchmarks"][benchmark]

    def facts(self, benchmark: str) -> Benchmark:
        return self.rules.benchmark(self.benchmark_cfg(benchmark)["mlperf_benchmark"])

    def task(self, benchmark: str) -> str:
        """The rules table's task of this benchmark (the tasks registry's key)."""
        return self.facts(benchmark).facts["task"]

    def system_cfg(self, system: str) -> dict[str, Any]:
        return self.config["systems"][system]

    # -- the job list ----------------------------------------------------------------
    @cached_property
    def jobs(self) -> list[Job]:
        return [
            Job(system, benchmark, scenario)
            for system, entry in self.config["systems"].items()
            for benchmark, scenarios in entry["benchmarks"].items()
            for scenario in scenarios
        ]

    def compliance_tests(self, benchmark: str) -> list[str]:
        return self.facts(benchmark).compliance_tests

    @cached_property
    def compliance_jobs(self) -> list[tuple[Job, str]]:
        return [(job, test) for job in self.jobs for test in self.compliance_tests(job.benchmark)]

    def audit_config(self, test: str, benchmark: str, scenario: str | None = None) -> str:
        """The audit.config of a compliance test for a benchmark (some tests sample a
        different number of queries per benchmark, or per scenario: the table's
        ``audit_config_by_scenario``)."""
        from .compliance import audit_config_text

        entry = self.compliance_test(test, benchmark)
        settings = {**entry["audit_config"], **(entry.get("audit_config_by_scenario") or {}).get(scenario, {})}
        return audit_config_text(test, settings)

    def compliance_test(self, test: str, benchmark: str) -> dict[str, Any]:
        return self.rules.compliance_test(test, self.facts(benchmark).name)

    def local_checkpoint(self, model: str, workdir: str | Path = ".") -> Path | None:
        """A model's files on this machine before it is acquired: a file:// source's folder
        (the shipped demo checkpoints, a site's local copy), relative paths from ``workdir``
        (the workflow's folder)."""
        source = self.config["models"][model]["source"]
        if source.startswith("file://"):
            folder = Path(workdir) / source[len("file://") :]
            if folder.is_dir():
                return folder
        return None

    def compliance_judges_speed(self, test: str, benchmark: str) -> bool:
        """Whether a compliance test's verdict depends on how fast its run went (it writes
        verify_performance.txt: TEST01, TEST04), so that its run is a measurement."""
        entry = self.compliance_test(test, benchmark)
        return "verify_performance.txt" in (entry.get("verify_files") or [entry.get("verify_file")])

    def system_benchmarks(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((j.system, j.benchmark) for j in self.jobs))

    @property
    def systems(self) -> list[str]:
        return list(self.config["systems"])

    @property
    def benchmarks(self) -> list[str]:
        return list(dict.fromkeys(j.benchmark for j in self.jobs))

    @property
    def scenarios(self) -> list[str]:
        return list(dict.fromkeys(j.scenario for j in self.jobs))

    @property
    def models(self) -> list[str]:
        return list(self.config["models"])

    @property
    def datasets(self) -> list[str]:
        return list(self.config["datasets"])

    @property
    def quantized_models(self) -> list[tuple[str, str]]:
        """(model, recipe) pairs some benchmark needs."""
        pairs = [(b["model"], b["quantization"]) for b in self.config["benchmarks"].values() if b.get("quantization")]
        return list(dict.fromkeys(pairs))

    # -- paths -------------------------------------------------------------------------
    @staticmethod
    def model_dir(model: str) -> str:
        return path("model", model=model)

    @staticmethod
    def dataset_dir(dataset: str) -> str:
        return path("dataset", dataset=dataset)

    @staticmethod
    def quantized_dir(model: str, recipe: str) -> str:
        return path("quantized", model=model, recipe=recipe)

    @staticmethod
    def emulated_dir(model: str, recipe: str) -> str:
        return path("emulated", model=model, recipe=recipe)

    @staticmethod
    def run_dir(system: str, benchmark: str, scenario: str, mode: str) -> str:
        return path("run", system=system, benchmark=benchmark, scenario=scenario, mode=mode)

    def repeat_run_dir(self, system: str, benchmark: str, scenario: str, repeat: int) -> str:
        """Repeat ``repeat`` (1-based) of a scenario's performance test: repeat 1 is the
        performance run itself, the others lie beside it (``repeats: N``); the packaged repeat
        of a benchmark with a paired test is the measurement pair's performance run."""
        test = self.paired_test(benchmark)
        if test and repeat == self.packaged_repeat(system, benchmark, scenario):
            return self.pair_path("pair_performance", system, benchmark, scenario)
        if repeat == 1:
            return path("run", system=system, benchmark=benchmark, scenario=scenario, mode="performance")
        return path("repeat_run", system=system, benchmark=benchmark, scenario=scenario, repeat=repeat)

    def compliance_run_dir(self, system: str, benchmark: str, scenario: str, test: str) -> str:
        """A compliance test's LoadGen run: the measurement pair's audited run for the paired test."""
        if test == self.paired_test(benchmark):
            return self.pair_path("pair_audited", system, benchmark, scenario)
        return path("compliance_run", system=system, benchmark=benchmark, scenario=scenario, test=test)

    def paired_test(self, benchmark: str) -> str | None:
        """The compliance test judged against the scenario's performance run (rules table:
        ``needs_performance_run``; TEST04), which rule measurement_pair measures together with
        that run; None where the benchmark has none."""
        paired = [
            t
            for t in self.compliance_tests(benchmark)
            if self.compliance_test(t, benchmark).get("needs_performance_run")
        ]
        if len(paired) > 1:
            raise UserError(
                f"rules table {self.rules.name}: {', '.join(paired)} of {self.facts(benchmark).name} all need the "
                "performance run; one measurement pair can hold only one of them"
            )
        return paired[0] if paired else None

    def pair_path(self, key: str, system: str, benchmark: str, scenario: str) -> str:
        """``pair_performance``, ``pair_audited`` or ``pair_attempts`` of a scenario's pair."""
        test = self.paired_test(benchmark)
        return path(key, system=system, benchmark=benchmark, scenario=scenario, test=test)

    @cached_property
    def pair_jobs(self) -> list[tuple[Job, str]]:
        """(scenario, paired test) of the measurement pairs (rule measurement_pair)."""
        return [(job, test) for job in self.jobs if (test := self.paired_test(job.benchmark))]

    @property
    def compliance_settings(self) -> dict[str, Any]:
        """The ``compliance`` section with its defaults: how a measurement pair is measured again."""
        return {**COMPLIANCE_DEFAULTS, **(self.config.get("compliance") or {})}

    @staticmethod
    def compliance_dir(system: str, benchmark: str, scenario: str, test: str) -> str:
        return path("compliance", system=system, benchmark=benchmark, scenario=scenario, test=test)

    @staticmethod
    def user_conf_path(system: str, benchmark: str, scenario: str) -> str:
        return path("user_conf", system=system, benchmark=benchmark, scenario=scenario)

    @staticmethod
    def accuracy_dir(system: str, benchmark: str, scenario: str) -> str:
        return path("accuracy", system=system, benchmark=benchmark, scenario=scenario)

    failed_results_path = PATHS["failed_results"]

    @staticmethod
    def acquire_record_path(kind: str, name: str) -> str:
        return path("acquire_record", kind=kind, name=name)

    @staticmethod
    def reference_accuracy_path(system: str, benchmark: str) -> str:
        return path("reference_accuracy", system=system, benchmark=benchmark)

    @staticmethod
    def reference_outputs_path(system: str, benchmark: str) -> str:
        return path("reference_outputs", system=system, benchmark=benchmark)

    def dataset_file(self, benchmark: str, purpose: str = "performance") -> str:
        """The file a run or evaluation reads. ``purpose``: performance, accuracy or a compliance
        test. ``datasets.<name>.file`` serves every purpose unless the rules table gives the
        benchmark separate files (gpt-oss-120b: ``dataset.accuracy_file``, and TEST07's
        ``dataset: compliance_file``), which lie at the table's paths inside the dataset folder."""
        name = self.benchmark_cfg(benchmark)["dataset"]
        folder = self.dataset_dir(name)
        key = self._dataset_file_key(purpose)
        table = self.facts(benchmark).facts.get("dataset", {})
        if key != "performance_file" and key in table:
            return f"{folder}/{table[key]}"
        return f"{folder}/{self.config['datasets'][name]['file']}"

    def _dataset_file_key(self, purpose: str) -> str:
        """The rules table's dataset key of the file a purpose reads (``accuracy_file``, ...)."""
        if purpose not in MODES:
            return self.rules.compliance_test(purpose).get("dataset", "performance_file")
        return f"{purpose}_file"

    def reasoning_effort(self, benchmark: str, purpose: str = "performance") -> str | None:
        """The harmony reasoning effort the round prescribes for the prompts this purpose
        reads (rules table ``dataset.reasoning_effort``, gpt-oss); None where it sets none.
        A purpose without a separate file reads the performance file, so it gets that effort."""
        table = self.facts(benchmark).facts.get("dataset", {})
        efforts = table.get("reasoning_effort") or {}
        key = self._dataset_file_key(purpose)
        return efforts.get(key if key in table else "performance_file")

    def prompt_check(self, benchmark: str, purpose: str = "performance") -> dict[str, Any] | None:
        """What the run stage checks of the prompts a purpose reads: the harmony
        ``reasoning_effort`` they must ask for and, where configured, the ``harmony_vocab``
        openai-harmony reads them with (``datasets.<name>.harmony_vocab``, else the
        MLPERF_REPRO_HARMONY_VOCAB variable). None for benchmarks whose table sets no effort."""
        effort = self.reasoning_effort(benchmark, purpose)
        if effort is None:
            return None
        dataset = self.config["datasets"][self.benchmark_cfg(benchmark)["dataset"]]
        vocab = dataset.get("harmony_vocab") or os.environ.get(HARMONY_VOCAB_ENV)
        if dataset["source"].startswith("builtin:"):
            vocab = None  # a stand-in's prompts are in its own tokenizer's ids, not o200k's
        return {"reasoning_effort": effort, "harmony_vocab": vocab or None}

    def dataset_build_args(self, dataset: str) -> dict[str, Any]:
        """What a builtin dataset must contain for the benchmarks that use it: ``files`` (each
        run purpose -> its file, relative to the dataset folder), the table's accuracy
        ``repeats`` per family (gpt-oss), so a stand-in has the real download's layout, and
        outside test scale the exact ``rows`` of its separate files: the round's accuracy
        sample count (the checkers demand it) and a compliance set of the size its test's
        audit.config runs through (min_query_count: every sample once), and each file's harmony
        reasoning ``efforts`` (gpt-oss: the effort its prompts must ask for)."""
        folder = self.dataset_dir(dataset)
        files: dict[str, str] = {}
        repeats: dict[str, int] = {}
        rows: dict[str, int] = {}
        efforts: dict[str, str] = {}
        for name, bench in self.config["benchmarks"].items():
            if bench["dataset"] != dataset:
                continue
            facts = self.facts(name)
            for purpose in ("performance", "accuracy", *self.compliance_tests(name)):
                files.setdefault(purpose, self.dataset_file(name, purpose)[len(folder) + 1 :])
                effort = self.reasoning_effort(name, purpose)
                if effort:
                    efforts.setdefault(files[purpose], effort)
                separate = files[purpose] != files["performance"]
                if separate and not self.test_scale:
                    rows[purpose] = int(
                        facts.accuracy_sample_count()
                        if purpose == "accuracy"
                        else self.compliance_test(purpose, name)["audit_config"]["min_query_count"]
                    )
            repeats.update(facts.accuracy.get("dataset_repeats", {}))
        return {"files": files, "repeats": repeats, "rows": rows, "efforts": efforts}

    def serving_dir(self, system: str, benchmark: str) -> str:
        """The checkpoint this system serves for this benchmark."""
        bench = self.benchmark_cfg(benchmark)
        recipe = bench.get("quantization")
        if recipe is None:
            return self.model_dir(bench["model"])
        if self.system_cfg(system)["engine"].get("serve_quantized_as", "native") == "emulated":
            return self.emulated_dir(bench["model"], recipe)
        return self.quantized_dir(bench["model"], recipe)

    def needs_reference_accuracy(self, benchmark: str) -> bool:
        return self.benchmark_cfg(benchmark).get("accuracy_target") == "measured"

    # -- per-job parameters ------------------------------------------------------------
    def loadgen_model(self, benchmark: str, scenario: str) -> str:
        return self.facts(benchmark).loadgen_model(scenario)

    def loadgen_scenario(self, scenario: str) -> str:
        return self.rules.loadgen_scenario(scenario)

    def dataset_samples(self, benchmark: str) -> int:
        """Samples in the dataset as the config describes it (builtin size, else the round's count)."""
        dataset = self.config["datasets"][self.benchmark_cfg(benchmark)["dataset"]]
        builtin = dataset.get("builtin") or {}
        return int(builtin.get("samples", self.facts(benchmark).facts["dataset"]["samples"]))

    def accuracy_samples(self, benchmark: str) -> int:
        """Samples an accuracy run covers: the round's accuracy count where the benchmark has a
        separate accuracy file (gpt-oss-120b: 4,395 of 6,396), else the whole dataset."""
        separate = "accuracy_file" in self.facts(benchmark).facts.get("dataset", {})
        if separate and not self.test_scale:
            return self.facts(benchmark).accuracy_sample_count()
        return self.dataset_samples(benchmark)

    def performance_sample_count(self, benchmark: str) -> int:
        samples = self.dataset_samples(benchmark)
        if self.test_scale:
            return min(self.test_scale.get("performance_sample_count", samples), samples)
        return min(self.facts(benchmark).facts["performance_sample_count"], samples)

    def scenario_cfg(self, system: str, benchmark: str, scenario: str) -> dict[str, Any]:
        return self.system_cfg(system)["benchmarks"][benchmark][scenario]

    # -- repeats: N ---------------------------------------------------------------------
    def repeats(self, system: str, benchmark: str, scenario: str) -> int:
        """How often the scenario's performance test runs (``repeats``, default 1)."""
        return int(self.scenario_cfg(system, benchmark, scenario).get("repeats", 1))

    def packaged_repeat(self, system: str, benchmark: str, scenario: str) -> int:
        """The repeat whose logs become the tree's ``performance/run_1`` (``packaged_repeat``,
        default 1; config validation keeps it within ``repeats``)."""
        return int(self.scenario_cfg(system, benchmark, scenario).get("packaged_repeat", 1))

    def performance_run_dirs(self, system: str, benchmark: str, scenario: str) -> list[str]:
        """Every repeat's run folder, repeat 1 (the performance run) first."""
        n = self.repeats(system, benchmark, scenario)
        return [self.repeat_run_dir(system, benchmark, scenario, k) for k in range(1, n + 1)]

    def packaged_run_dir(self, system: str, benchmark: str, scenario: str) -> str:
        """The performance run the package, the summary's result and the compliance tests that
        compare with the performance run read."""
        return self.repeat_run_dir(system, benchmark, scenario, self.packaged_repeat(system, benchmark, scenario))

    @cached_property
    def repeat_jobs(self) -> list[tuple[Job, int]]:
        """(scenario, repeat) of the extra performance runs, repeat 2..N (rule loadgen_repeat),
        but a packaged repeat that a measurement pair makes."""
        return [
            (job, k)
            for job in self.jobs
            for k in range(2, self.repeats(job.system, job.benchmark, job.scenario) + 1)
            if not (
                self.paired_test(job.benchmark) and k == self.packaged_repeat(job.system, job.benchmark, job.scenario)
            )
        ]

    def user_conf_settings(self, system: str, benchmark: str, scenario: str) -> dict[str, Any]:
        """The scenario's LoadGen settings; target_qps may be ``auto`` (see :meth:`target_is_auto`)."""
        return user_conf_settings(
            self.rules,
            self.facts(benchmark),
            scenario,
            self.scenario_cfg(system, benchmark, scenario),
            self.test_scale,
            self.dataset_samples(benchmark),
        )

    def user_conf_header(self, system: str, benchmark: str, scenario: str) -> str:
        header = (
            f"LoadGen user.conf for {system} / {benchmark} / {scenario}, generated by mlperf-repro\n"
            f"from the workflow config: change the config, not this file."
        )
        if self.test_scale:
            header += "\nTEST SCALE: shortened run on reduced sample counts - NOT SUBMITTABLE."
        return header

    def user_conf_request(self, system: str, benchmark: str, scenario: str) -> dict[str, Any]:
        """What the ``user_conf`` job renders (its param, so a changed setting reruns exactly that
        scenario): with target_qps ``auto`` the job also reads its find-performance result."""
        return {
            "where": f"systems.{system}.benchmarks.{benchmark}.{scenario}",
            "scenario": scenario,
            "loadgen_model": self.loadgen_model(benchmark, scenario),
            "loadgen_scenario": self.loadgen_scenario(scenario),
            "settings": self.user_conf_settings(system, benchmark, scenario),
            "header": self.user_conf_header(system, benchmark, scenario),
        }

    def user_conf_text(self, system: str, benchmark: str, scenario: str, find_performance: str | None = None) -> str:
        """The generated user.conf; a target_qps ``auto`` scenario needs its find-performance JSON."""
        return user_conf_from_request(self.user_conf_request(system, benchmark, scenario), find_performance)

    # -- target_qps: auto ------------------------------------------------------------------
    def target_is_auto(self, system: str, benchmark: str, scenario: str) -> bool:
        return self.scenario_cfg(system, benchmark, scenario)["target_qps"] == AUTO

    @cached_property
    def find_performance_jobs(self) -> list[Job]:
        """The scenarios whose target_qps a find-performance pass measures first."""
        return [j for j in self.jobs if self.target_is_auto(j.system, j.benchmark, j.scenario)]

    @property
    def find_performance_settings(self) -> dict[str, Any]:
        """The config's ``find_performance`` section over the defaults."""
        return {**FIND_PERFORMANCE_DEFAULTS, **(self.config.get("find_performance") or {})}

    @staticmethod
    def find_performance_path(system: str, benchmark: str, scenario: str) -> str:
        return path("find_performance", system=system, benchmark=benchmark, scenario=scenario)

    @staticmethod
    def find_performance_runs_dir(system: str, benchmark: str, scenario: str) -> str:
        return path("find_performance_runs", system=system, benchmark=benchmark, scenario=scenario)

    def find_performance_input(self, system: str, benchmark: str, scenario: str) -> list[str]:
        """The find-performance result a user.conf reads: the scenario's own with target_qps auto."""
        if self.target_is_auto(system, benchmark, scenario):
            return [self.find_performance_path(system, benchmark, scenario)]
        return []

    def search_start(self, system: str, benchmark: str, scenario: str) -> tuple[float | None, str, str | None]:
        """Where a find-performance search starts: (rate or None, what it is, the Offline pass's
        JSON to read the rate from or None). start_qps first; a Server or Interactive search
        without one starts from the Offline scenario of the same system and benchmark (its
        measured rate where it is auto, else its target_qps); Offline and SingleStream climb
        from a low rate (mlperf_repro.find_performance.FIRST_QPS)."""
        cfg = self.scenario_cfg(system, benchmark, scenario)
        if cfg.get("start_qps"):
            return float(cfg["start_qps"]), "start_qps", None
        offline = self.system_cfg(system)["benchmarks"][benchmark].get("Offline")
        if scenario in LATENCY_SCENARIOS and offline:
            if offline["target_qps"] == AUTO:
                return (
                    None,
                    "the Offline find-performance pass",
                    self.find_performance_path(system, benchmark, "Offline"),
                )
            return float(offline["target_qps"]), "the Offline target_qps", None
        return None, "the default first rate", None

    def find_performance_request(self, system: str, benchmark: str, scenario: str) -> dict[str, Any]:
        """What one find-performance job searches with (its param)."""
        settings = self.find_performance_settings
        scenario_settings = self.user_conf_settings(system, benchmark, scenario)
        start_qps, start_from, _ = self.search_start(system, benchmark, scenario)
        # The short runs never outlast the real one (a test-scale run keeps its own short durations).
        real_ms = int(scenario_settings.get("min_duration", self.rules.min_duration_ms))
        limits = self.facts(benchmark).latency_limits_ms(scenario) or {}
        return {
            "system": system,
            "benchmark": benchmark,
            "scenario": scenario,
            "loadgen_model": self.loadgen_model(benchmark, scenario),
            "loadgen_scenario": self.loadgen_scenario(scenario),
            "settings": scenario_settings,
            "min_duration_ms": min(int(settings["min_duration_ms"]), real_ms),
            "margin": float(settings["margin"]),
            "max_steps": int(settings["max_steps"]),
            "min_query_count": int(settings["min_query_count"]),
            "start_qps": start_qps,
            "start_from": start_from,
            "latency_limits_ms": {k: v for k, v in limits.items() if k in ("ttft", "tpot")},
            "header": (
                f"A short run of the find-performance pass for {system} / {benchmark} / {scenario} "
                f"(target_qps: auto), generated by mlperf-repro."
            ),
        }

    def max_new_tokens(self, benchmark: str, mode: str = "performance") -> int | None:
        """The rules table's cap on generated tokens for this mode (None where it has none)."""
        gen = self.facts(benchmark).facts.get("generation") or {}
        max_new = gen.get("max_new_tokens") or gen.get(f"max_new_tokens_{mode}")
        return int(max_new) if max_new else None

    def generation(self, benchmark: str, mode: str = "performance") -> GenerationSettings:
        gen = self.facts(benchmark).facts["generation"]
        max_new = self.max_new_tokens(benchmark, mode)
        if max_new is None:
            raise KeyError(f"{benchmark}: the rules table gives no max_new_tokens for {mode} runs")
        return GenerationSettings(
            max_new_tokens=max_new,
            min_new_tokens=int(gen.get("min_new_tokens", 1)),
            greedy=bool(gen.get("greedy", True)),
            temperature=float(gen.get("temperature", 1.0)),
            top_p=float(gen.get("top_p", 1.0)),
        )

    def accuracy_rules(self, benchmark: str) -> dict[str, Any]:
        """What the evaluator reads: the rules table's ``accuracy`` entry, with the config's
        ``benchmarks.<name>.vbench`` (where VBench and its checkpoints are) for text-to-video,
        and ``allow_unsandboxed_code`` where the config's ``sandbox.allow_unsandboxed`` accepts
        running model-written code without isolation (absent otherwise, so the default leaves
        the jobs' parameters as they were)."""
        rules = dict(self.facts(benchmark).accuracy)
        if "vbench_dimensions" in rules:
            rules["dimensions"] = list(rules["vbench_dimensions"])
            rules["vbench"] = dict(self.benchmark_cfg(benchmark).get("vbench") or {})
        if (self.config.get("sandbox") or {}).get("allow_unsandboxed"):
            rules["allow_unsandboxed_code"] = True
        release = self.facts(benchmark).facts.get("dataset", {}).get("livecodebench_release")
        if release:
            own = self.accuracy_datasets(benchmark)
            if own:  # its own acquired datasets entry (an input of the accuracy jobs): required
                folder, required = own[0], True
            else:  # inside the dataset folder, where the download carries it
                folder = f"{self.dataset_dir(self.benchmark_cfg(benchmark)['dataset'])}/{release['folder']}"
                required = False
            rules["livecodebench_release"] = {"version": release["version"], "folder": folder, "required": required}
        return rules

    def acquire_entry(self, kind: str, name: str) -> dict[str, Any]:
        """``config[kind][name]`` as the acquire job fetches it: from the offline bundle (config key
        ``bundle``, else ``MLPERF_REPRO_BUNDLE``) where one is given."""
        from .bundle import bundled_entry

        return bundled_entry(kind, name, self.config[kind][name], self.bundle())

    def bundle(self) -> str | None:
        """The offline bundle the run takes its artifacts and images from: the config key
        ``bundle``, else ``MLPERF_REPRO_BUNDLE``; None: none."""
        import os

        from .bundle import BUNDLE_ENV

        return self.config.get("bundle") or os.environ.get(BUNDLE_ENV) or None

    def accuracy_dataset_entries(self, benchmark: str) -> list[str]:
        """The datasets entries the accuracy jobs read besides the benchmark's dataset: the
        LiveCodeBench release of ``benchmarks.<b>.livecodebench_release``."""
        entry = self.benchmark_cfg(benchmark).get("livecodebench_release")
        return [entry] if entry else []

    def accuracy_datasets(self, benchmark: str) -> list[str]:
        """The acquired folders of :meth:`accuracy_dataset_entries` (the accuracy jobs' inputs)."""
        return [self.dataset_dir(entry) for entry in self.accuracy_dataset_entries(benchmark)]

    def generation_params(self, benchmark: str, mode: str = "performance") -> dict[str, Any]:
        """What a run's backend generates with: the LLMs' decoding settings (:meth:`generation`),
        or for text-to-video the rules table's video settings with the config's
        ``benchmarks.<name>.video`` (a stand-in's smaller videos) laid over them."""
        if self.task(benchmark) != "text-to-video":
            return dict(self.generation(benchmark, mode).__dict__)
        table = dict(self.facts(benchmark).facts["generation"])
        params = {**table, **(self.benchmark_cfg(benchmark).get("video") or {})}
        latent = self.facts(benchmark).facts["dataset"].get("latent_file")
        dataset = self.benchmark_cfg(benchmark)["dataset"]
        if latent and not self.config["datasets"][dataset]["source"].startswith("builtin:"):
            # The reference's latent; the backend refuses it missing or of another shape.
            params["latent_file"] = f"{self.dataset_dir(dataset)}/{latent}"
        return params

    def accelerators(self, system: str, endpoints: int | None = None) -> int:
        """Accelerators one run job occupies, over all its nodes (the generic ``gpu`` resource;
        0 on CPU hosts, and 0 for a head whose servers run outside the job: launch external, or
        launch kubernetes, whose server pods request their own GPUs)."""
        engine = self.engine(system)
        if engine["backend"] == "endpoints" and engine["endpoints"].get("launch", "external") not in (
            "local",
            "shared",
            "slurm",
        ):
            return 0
        return self.server_accelerators(system, endpoints)

    def server_accelerators(self, system: str, endpoints: int | None = None) -> int:
        """Accelerators a run of this system keeps busy, wherever its servers run (the job
        itself, its SLURM allocation, or the server pods of launch kubernetes; the GPU-hours of
        the plan view); for launch external the servers' own, as listed."""
        engine = self.engine(system)
        if engine["backend"] == "endpoints":
            return sum(
                e.get("accelerator_count", 1)
                for e in engine["endpoints"]["list"][:endpoints]
                if e.get("accelerator", "N/A") != "N/A"
            )
        desc = self.system_cfg(system)["description"]
        return int(desc["accelerators_per_node"]) * int(desc["number_of_nodes"])

    def system_accelerators(self, system: str) -> int:
        """All accelerators the system occupies while it runs (every node, every endpoint; the
        GPU-hours of the plan view): the description's accelerators_per_node x number_of_nodes,
        the servers' own (:meth:`server_accelerators`) where either is ``auto``."""
        desc = self.system_cfg(system)["description"]
        per_node, nodes = desc["accelerators_per_node"], desc["number_of_nodes"]
        if "auto" in (per_node, nodes):
            # The servers' accelerators, wherever they run (SLURM allocation, Kubernetes server pods).
            return self.server_accelerators(system)
        return int(per_node) * int(nodes)

    def endpoint_accelerators(self, system: str, count: int) -> int:
        """Accelerators a run on the first ``count`` endpoints occupies: those listed with an
        accelerator, else that share of :meth:`system_accelerators`."""
        endpoints = self.engine(system)["endpoints"]["list"]
        if any(e.get("accelerator", "N/A") != "N/A" for e in endpoints[:count]):
            return self.server_accelerators(system, count)
        return self.system_accelerators(system) * count // len(endpoints)

    def server_nodes(self, system: str, endpoints: int | None = None) -> int:
        """Nodes a run of this system occupies: the allocation of launch slurm, one per server
        pod of launch kubernetes, the listed servers' nodes otherwise."""
        engine = self.engine(system)
        if engine["backend"] == "endpoints":
            return len({e.get("node", e["host"]) for e in engine["endpoints"]["list"][:endpoints]})
        return int(self.system_cfg(system)["description"]["number_of_nodes"])

    def nodes(self, system: str, endpoints: int | None = None) -> int:
        """Nodes one run job asks the scheduler for: the allocation of a launch: slurm system
        (the head starts a server on each; a scaling run only the nodes of its first
        ``endpoints`` servers), else the node it runs on."""
        config = self.engine(system).get("endpoints") or {}
        if self.engine(system)["backend"] == "endpoints" and config.get("launch") == "slurm":
            return len({e["node"] for e in config["list"][:endpoints]})
        return 1

    def server_tasks(self, system: str, endpoints: int | None = None) -> int | None:
        """SLURM tasks of a launch: slurm run job, one per server (the head runs in the batch
        step; the plugin wants at least 2 tasks for a job that starts its own srun steps);
        None for every other system."""
        if self.launches_in_allocation(system):
            return max(len(self.engine(system)["endpoints"]["list"][:endpoints]), 2)
        return None

    def engine(self, system: str) -> dict[str, Any]:
        return self.system_cfg(system)["engine"]

    def run_engine(self, system: str, benchmark: str, scenario: str) -> dict[str, Any]:
        """The engine one scenario's runs use: the system's, with the scenario's own engine_args
        and env (``systems.<s>.benchmarks.<b>.<Scenario>.engine``) on top."""
        engine = self.engine(system)
        own = (self.system_cfg(system)["benchmarks"][benchmark][scenario].get("engine")) or {}
        if not own:
            return engine
        return {
            **engine,
            "engine_args": {**(engine.get("engine_args") or {}), **(own.get("engine_args") or {})},
            "env": {**(engine.get("env") or {}), **(own.get("env") or {})},
        }

    def screening(self, system: str) -> dict[str, Any] | None:
        """The system's GPU screening settings when its runs screen their GPUs first: enabled,
        and the run host holds accelerators (CPU hosts and heads of external servers do not)."""
        screening = self.system_cfg(system).get("gpu_screening") or {}
        if not screening.get("enabled") or self.accelerators(system) == 0 or self.launches_in_allocation(system):
            return None
        return screening

    def allocation_screening(self, system: str) -> dict[str, Any] | None:
        """Screening settings of a launch: slurm system: its run job screens every node of its
        allocation before it starts the servers (there is no separate screen_gpus job); of
        launch: slurm-shared: its server job does."""
        screening = self.system_cfg(system).get("gpu_screening") or {}
        launch = (self.engine(system).get("endpoints") or {}).get("launch")
        if screening.get("enabled") and launch in ("slurm", "slurm-shared") and self.server_accelerators(system):
            return screening
        return None

    def launches_in_allocation(self, system: str) -> bool:
        engine = self.engine(system)
        return engine["backend"] == "endpoints" and (engine.get("endpoints") or {}).get("launch") == "slurm"

    def shares_servers(self, system: str | None = None) -> bool:
        """The system's runs attach to servers started once per workflow run (launch shared,
        or slurm-shared: a server job; backend diffusers: engine.launch shared, its video
        server); without a system, whether any system's do."""
        return any(self.shared_launch(s) for s in ([system] if system else self.systems))

    def shared_launch(self, system: str) -> str | None:
        """How the system's runs share one model load (``shared``, ``slurm-shared``), or None."""
        engine = self.engine(system)
        launch = (
            (engine.get("endpoints") or {}).get("launch") if engine["backend"] == "endpoints" else engine.get("launch")
        )
        return launch if launch in ("shared", "slurm-shared") else None

    def submits_server_jobs(self) -> bool:
        """Some system's servers run in a SLURM server job of their own (launch slurm-shared)."""
        return any(
            self.engine(s)["backend"] == "endpoints"
            and (self.engine(s).get("endpoints") or {}).get("launch") == "slurm-shared"
            for s in self.systems
        )

    def launches_on_kubernetes(self, system: str) -> bool:
        """The run job creates the server pods itself (launch kubernetes)."""
        engine = self.engine(system)
        return engine["backend"] == "endpoints" and (engine.get("endpoints") or {}).get("launch") == "kubernetes"

    @staticmethod
    def screen_path(system: str) -> str:
        return path("screen", system=system)

    def screen_input(self, system: str) -> list[str]:
        """The screen result a run of this system waits for (none when it is not screened)."""
        return [self.screen_path(system)] if self.screening(system) else []

    def job_screening(self, system: str) -> dict[str, Any] | None:
        """What a run job of this system needs to apply the GPU screen (its rule's param; None
        when the system is not screened)."""
        if self.allocation_screening(system):
            # launch: slurm: the run screens its allocation's nodes when it starts the servers.
            return {"allocation": True, "settings": self.allocation_screening(system), "system": system}
        if not self.screening(system):
            return None
        return {
            "file": self.screen_path(system),
            "settings": self.screening(system),
            "system": system,
            "expected": self.expected_devices(system),
        }

    def expected_devices(self, system: str) -> int:
        """Accelerators the run host should show: one node's for the in-process engine, every
        locally launched server's for backend endpoints."""
        if self.engine(system)["backend"] == "endpoints":
            return self.accelerators(system)
        return int(self.system_cfg(system)["description"]["accelerators_per_node"])

    # -- software per stage ----------------------------------------------------------------
    def container(self, system: str) -> str | None:
        """What apptainer runs this system's heavy jobs in (Snakemake's ``container:``): the
        image of :meth:`container_image`, taken from the offline bundle's archive
        (``oci-archive:/.../images/<system>.oci.tar``, :func:`bundle.bundled_image`) where a
        bundle is given, else the configured reference, which apptainer pulls."""
        return self._runnable(system, self.container_image(system))

    def container_image(self, system: str) -> str | None:
        """The digest-pinned image this system's heavy jobs run in under apptainer, as the
        config names it (what provenance records, with or without a bundle); None means the pip
        environments of envs/ (CPU hosts), and the workflow's own pod image for the head of a
        launch kubernetes system (it needs the Kubernetes client and no GPU; its server pods run
        the image, see :meth:`server_image`)."""
        if self.launches_on_kubernetes(system):
            return None
        return self.server_image(system)

    def server_image(self, system: str) -> str | None:
        """The image the system's inference servers run (systems.<name>.software.container)."""
        return (self.system_cfg(system).get("software") or {}).get("container")

    def quantize_container(self, model: str, recipe: str) -> str | None:
        """What apptainer runs the quantize job in: :meth:`quantize_image`, from the bundle's
        archive of that system's image where a bundle is given (as :meth:`container`)."""
        system = self._quantize_system(model, recipe)
        return self._runnable(system, self.server_image(system)) if system else None

    def quantize_image(self, model: str, recipe: str) -> str | None:
        """Quantization runs in the image of the first system (config order) that serves its
        output, so the FP4 checkpoint is written by the torch the servers load it with."""
        system = self._quantize_system(model, recipe)
        return self.server_image(system) if system else None

    def _quantize_system(self, model: str, recipe: str) -> str | None:
        """The first system (config order) serving ``model`` quantized by ``recipe`` that names an image."""
        return next((s for s in self.systems_serving(model, recipe) if self.server_image(s)), None)

    def _runnable(self, system: str, image: str | None) -> str | None:
        bundle = self.bundle() if image else None
        if not bundle:
            return image
        from .bundle import bundled_image

        return bundled_image(system, image, bundle)

    def systems_serving(self, model: str, recipe: str) -> list[str]:
        """The systems (config order) running a benchmark of ``model`` quantized by ``recipe``."""
        return [
            system
            for system, entry in self.config["systems"].items()
            if any(
                (self.benchmark_cfg(b)["model"], self.benchmark_cfg(b).get("quantization")) == (model, recipe)
                for b in entry["benchmarks"]
            )
        ]

    def quantize_device(self, recipe: str) -> dict[str, Any]:
        """Where a recipe's quantize job runs: ``device`` ("cpu" or "gpu", the recipe's or what
        its tool needs), ``gpus`` (0 on a CPU), ``gpu_model`` (None: any), and ``needs_gpu``
        with the reason when the tool cannot run the recipe on a CPU (else None)."""
        from .quant.tools import needed_device

        entry = self.config["quantization"][recipe]
        needed, why = needed_device(entry)
        device = entry.get("device") or needed
        gpus = int(entry.get("gpus", 1)) if device == "gpu" else 0
        return {"device": device, "gpus": gpus, "gpu_model": entry.get("gpu_model") if gpus else None, "needs_gpu": why}

    def recipe_calibrates(self, recipe: str) -> bool:
        """The recipe measures something on calibration rows of its benchmark's dataset: tool
        quark (its algorithms), or the native writer's static scales (FP8, NVFP4 activations;
        an FP8 KV cache)."""
        from .quant.schemes import needs_calibration

        entry = self.config["quantization"][recipe]
        tool = entry.get("tool") or "native"
        return tool == "quark" or (tool == "native" and needs_calibration(entry))

    def quantizes_pipeline(self, model: str, recipe: str) -> bool:
        """The model a benchmark quantizes with this recipe is a text-to-video Diffusers pipeline
        (the quantize stage then quantizes its transformers' block Linears, uncalibrated)."""
        return any(
            (bench["model"], bench.get("quantization")) == (model, recipe) and self.task(name) == "text-to-video"
            for name, bench in self.config["benchmarks"].items()
        )

    def calibration_source(self, model: str, recipe: str) -> tuple[str, str] | None:
        """(datasets entry, file) the recipe's calibration rows come from: ``calibration.dataset``
        (e.g. MLCommons' OpenOrca calibration subset, acquired and checksummed like any dataset),
        else the dataset of the first benchmark (config order) that serves ``model`` with it;
        None for a recipe that calibrates nothing, and for a text-to-video model (a Diffusers
        pipeline: no token rows; config validation refuses a recipe there that would need them)."""
        if not self.recipe_calibrates(recipe) or self.quantizes_pipeline(model, recipe):
            return None
        name = (self.config["quantization"][recipe].get("calibration") or {}).get("dataset")
        if name:
            return name, f"{self.dataset_dir(name)}/{self.config['datasets'][name]['file']}"
        for benchmark, bench in self.config["benchmarks"].items():
            if (bench["model"], bench.get("quantization")) == (model, recipe):
                return bench["dataset"], self.dataset_file(benchmark, "performance")
        return None

    def open_accuracy(self, benchmark: str) -> dict[str, Any] | None:
        """``benchmarks.<name>.open_accuracy`` (defaults filled): the weight-free metrics an
        open-division text-to-video stand-in is judged by in place of the round's score; None
        where the benchmark declares none."""
        entry = self.benchmark_cfg(benchmark).get("open_accuracy")
        return copy.deepcopy(entry) if entry else None

    def accuracy_targets(self, benchmark: str) -> dict[str, Any]:
        """How accuracy is judged: the round's absolute targets, or a fraction of a measured
        reference; with ``open_accuracy``, its metrics: a fraction of the unquantized model's
        value or the config's minimum, each as the metric's record says
        (accuracy.video_quality.OPEN_METRICS), the others reported only."""
        bench = self.benchmark_cfg(benchmark)
        facts = self.facts(benchmark)
        open_accuracy = self.open_accuracy(benchmark)
        if bench.get("accuracy_target") == "measured" and open_accuracy:
            from .accuracy.video_quality import OPEN_METRICS

            kinds = {m: OPEN_METRICS[m].target for m in open_accuracy["metrics"]}
            return {
                "kind": "measured",
                "fraction": bench.get("accuracy_fraction", 0.99),
                "metrics": [m for m, kind in kinds.items() if kind == "fraction"],
                "minimums": {m: float(open_accuracy[f"{m}_minimum"]) for m, kind in kinds.items() if kind == "minimum"},
                "open_metrics": list(open_accuracy["metrics"]),
                "replaces": list(facts.accuracy["targets"]),
            }
        if bench.get("accuracy_target") == "measured":
            return {
                "kind": "measured",
                "fraction": bench.get("accuracy_fraction", 0.99),
                "metrics": list(facts.accuracy["targets"]),
            }
        return {"kind": "reference", "targets": facts.absolute_targets(), "upper_bounds": facts.upper_bounds()}

    def model_mapping(self) -> dict[str, str]:
        """Open division: result names that differ from the benchmark they stand in for."""
        return {
            name: bench["mlperf_benchmark"]
            for name, bench in self.config["benchmarks"].items()
            if name != bench["mlperf_benchmark"] and name in self.benchmarks
        }

    # -- scaling study -------------------------------------------------------------------
    @cached_property
    def scaling(self) -> dict[str, Any] | None:
        return self.config.get("scaling_study")

    def scaling_counts(self) -> list[int]:
        """Endpoint counts to run: the configured ones, else 1, 2, 4, ... and the full list."""
        study = self.scaling
        total = len(self.engine(study["system"])["endpoints"]["list"])
        if study.get("endpoint_counts"):
            return sorted(set(study["endpoint_counts"]))
        counts, n = [], 1
        while n < total:
            counts.append(n)
            n *= 2
        return counts + [total]

    def scaling_jobs(self) -> list[tuple[str, int]]:
        study = self.scaling
        scenarios = study.get("scenarios") or list(self.system_cfg(study["system"])["benchmarks"][study["benchmark"]])
        return [(scenario, n) for scenario in scenarios for n in self.scaling_counts()]

    def scaling_points(self) -> list[dict[str, Any]]:
        """What the scaling report reads, per run of the study (its rule's param)."""
        system, benchmark = self.scaling["system"], self.scaling["benchmark"]
        facts = self.facts(benchmark)
        return [
            {
                "run_dir": self.scaling_run_dir(system, benchmark, scenario, n),
                "scenario": scenario,
                "endpoints": n,
                "result_field": facts.result_field(scenario),
                "result_unit": facts.result_unit(scenario),
            }
            for scenario, n in self.scaling_jobs()
        ]

    def scaling_engine(self, system: str, count: int) -> dict[str, Any]:
        """The system's engine with only its first ``count`` endpoints."""
        engine = dict(self.engine(system))
        engine["endpoints"] = dict(engine["endpoints"], list=engine["endpoints"]["list"][:count])
        return engine

    def scaling_user_conf_settings(self, system: str, benchmark: str, scenario: str, count: int) -> dict[str, Any]:
        """The scenario's user.conf settings with target_qps scaled to ``count`` of the system's
        endpoints (count / all of them); target_qps ``auto`` stays (its job scales the found one)."""
        settings = dict(self.user_conf_settings(system, benchmark, scenario))
        if settings["target_qps"] != AUTO:
            settings["target_qps"] = round(float(settings["target_qps"]) * self.scaling_share(system, count), 6)
        return settings

    def scaling_share(self, system: str, count: int) -> float:
        return count / len(self.engine(system)["endpoints"]["list"])

    def scaling_user_conf_request(self, system: str, benchmark: str, scenario: str, count: int) -> dict[str, Any]:
        """The scenario's user.conf with target_qps scaled to ``count`` of the system's endpoints,
        so every point of the study loads its endpoints alike (the ``scaling_user_conf`` job's param)."""
        total = len(self.engine(system)["endpoints"]["list"])
        request = self.user_conf_request(system, benchmark, scenario)
        request["header"] = (
            f"LoadGen user.conf for the scaling study: {system} / {benchmark} / {scenario} on {count} of "
            f"{total} endpoints (target_qps scaled by {count}/{total}); generated by mlperf-repro."
        )
        request["target_scale"] = self.scaling_share(system, count)
        return request

    def scaling_user_conf_text(
        self, system: str, benchmark: str, scenario: str, count: int, find_performance: str | None = None
    ) -> str:
        request = self.scaling_user_conf_request(system, benchmark, scenario, count)
        return user_conf_from_request(request, find_performance)

    @staticmethod
    def scaling_run_dir(system: str, benchmark: str, scenario: str, count: int) -> str:
        return path("scaling_run", system=system, benchmark=benchmark, scenario=scenario, n_endpoints=count)

    def scaling_outputs(self) -> list[str]:
        if not self.scaling:
            return []
        where = {"system": self.scaling["system"], "benchmark": self.scaling["benchmark"]}
        return [path(key, **where) for key in ("scaling_csv", "scaling_md", "scaling_svg")]

    # -- targets ------------------------------------------------------------------------
    def run_outputs(self) -> list[str]:
        """Every scenario's performance run (the measurement pair's where it has one) and accuracy run."""
        return [
            self.repeat_run_dir(j.system, j.benchmark, j.scenario, 1)
            if m == "performance"
            else self.run_dir(j.system, j.benchmark, j.scenario, m)
            for j in self.jobs
            for m in MODES
        ]

    def pair_outputs(self) -> list[str]:
        """Every measurement pair's attempts record (its runs are in run_outputs and the packaged repeat)."""
        return [self.pair_path("pair_attempts", j.system, j.benchmark, j.scenario) for j, _ in self.pair_jobs]

    def repeat_outputs(self) -> list[str]:
        """The extra performance runs of the scenarios with ``repeats`` above 1."""
        return [self.repeat_run_dir(j.system, j.benchmark, j.scenario, k) for j, k in self.repeat_jobs]

    def packaged_repeat_outputs(self) -> list[str]:
        """The repeats a ``packaged_repeat`` above 1 puts into the tree instead of the performance run."""
        return [
            self.packaged_run_dir(j.system, j.benchmark, j.scenario)
            for j in self.jobs
            if self.packaged_repeat(j.system, j.benchmark, j.scenario) > 1
        ]

    def accuracy_outputs(self) -> list[str]:
        return [path("accuracy_json", system=j.system, benchmark=j.benchmark, scenario=j.scenario) for j in self.jobs]

    def compliance_outputs(self) -> list[str]:
        return [self.compliance_dir(j.system, j.benchmark, j.scenario, t) for j, t in self.compliance_jobs]
