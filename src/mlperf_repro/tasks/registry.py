"""The benchmark tasks the workflow serves, one :class:`Task` record each.

The rules table gives every benchmark a ``task`` (``llm``, ``text-to-video``, ...). A task
bundles everything that depends on it: how its dataset files are read, the system under
test LoadGen drives, the backends that can serve it, its accuracy evaluators (keyed by the
table's ``accuracy.evaluator`` name), the data type of its accuracy-log entries and the
compliance tests this workflow verifies for it. Adding a task is one module under
``mlperf_repro/tasks/`` that calls :func:`register_task`, imported from ``tasks/__init__``.

This module imports nothing of the workflow but the errors: task modules keep their heavy
imports (transformers, pandas, LoadGen) inside functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import UserError

# (entries, dataset_file, tokenizer, accuracy_rules) -> (metrics, accuracy.txt text), where
# entries are [(qsl_idx, values)] from the accuracy log and accuracy_rules is the
# benchmark's ``accuracy`` entry of the rules table.
ScoreFn = Callable[[list, str, Any, dict[str, Any]], tuple[dict[str, Any], str]]


@dataclass(frozen=True)
class Evaluator:
    """One accuracy evaluator, as the rules table names it (``accuracy.evaluator``)."""

    name: str
    score: ScoreFn
    # tokenizer_dir -> the tokenizer as the evaluator's reference script loads it; None for
    # evaluators that need none (they get ``tokenizer=None``).
    load_tokenizer: Callable[[str], Any] | None = None
    # True: score only the first log entry of each sample (llama2's reference); False:
    # every entry (gpt-oss scores repeated samples each time).
    first_per_sample: bool = True
    # (entries, dataset_file, accuracy_rules, out_dir) -> {file: what}: outputs the package's
    # accuracy/ folder must carry besides accuracy.txt (text-to-video: the table's videos and
    # their captions), written into out_dir; None where the round asks for none.
    write_extras: Callable[[list, str, dict[str, Any], Any], dict[str, Any]] | None = None


@dataclass(frozen=True)
class Task:
    """Everything the harness, the evaluate stage and the checks need to know about a task."""

    name: str
    # (path, limit=None) -> a dataset with ``prompts`` (what the SUT serves) and len().
    read_dataset: Callable[..., Any]
    # (dataset, *, report_first_token) -> the LoadGen system under test.
    make_sut: Callable[..., Any]
    backends: tuple[str, ...]  # systems.<name>.engine.backend values that can serve it
    evaluators: tuple[Evaluator, ...]
    # (engine, *, model_path, generation, stream, sut) -> the backend (backends.Backend) that
    # serves the SUT: ``engine`` is the system's engine config, ``generation`` the plan's
    # generation parameters of the run (Plan.generation_params).
    make_backend: Callable[..., Any] | None = None
    accuracy_log_dtype: str = "int32"  # accuracy.loadgen_log.DTYPES key of the log's entries
    compliance: tuple[str, ...] = ()  # compliance tests run and verified end to end
    # (model_dir, dataset, *, generation, engine, out_dir, reporter) -> (entries, tokenizer): the
    # unquantized model's answers to every sample of the accuracy dataset, shaped as the
    # accuracy log's entries [(qsl_idx, values)], for the measured reference (accuracy_target:
    # measured); files the comparison needs (text-to-video: the mp4s) go to out_dir. ``reporter``
    # is the job's progress.Progress. None: the task has no reference run.
    reference_outputs: Callable[..., tuple[list, Any]] | None = None
    # Open division: weight-free metrics a stand-in may be judged by in place of the round's
    # score (benchmarks.<name>.open_accuracy). (entries, metric names, reference outputs folder,
    # accuracy_rules, extras_dir or None) -> the metrics (accuracy.video_quality.score_videos's
    # record); None: the task has none.
    score_open: Callable[..., dict[str, Any]] | None = None

    @property
    def evaluator_names(self) -> list[str]:
        return [e.name for e in self.evaluators]

    def evaluator(self, name: str) -> Evaluator:
        for evaluator in self.evaluators:
            if evaluator.name == name:
                return evaluator
        raise UserError(
            f"the {self.name} task has no accuracy evaluator '{name}' "
            f"(its evaluators: {', '.join(self.evaluator_names) or 'none'})"
        )


TASKS: dict[str, Task] = {}


def register_task(task: Task, *, replace: bool = False) -> Task:
    """Add ``task`` to :data:`TASKS`. Evaluator names are global (the rules table names an
    evaluator, the stages look it up by that name), so two tasks may not share one."""
    if task.name in TASKS and not replace:
        raise ValueError(f"task '{task.name}' is already registered")
    for other in TASKS.values():
        if other.name != task.name:
            shared = set(other.evaluator_names) & set(task.evaluator_names)
            if shared:
                raise ValueError(f"task '{task.name}': evaluator(s) {sorted(shared)} already belong to '{other.name}'")
    TASKS[task.name] = task
    return task


def known_tasks() -> str:
    return ", ".join(sorted(TASKS)) or "none"


def task_named(name: str) -> Task:
    """A registered task by its rules-table name."""
    try:
        return TASKS[name]
    except KeyError:
        raise UserError(f"no '{name}' task is registered (known tasks: {known_tasks()})") from None


def task_for(benchmark: Any) -> Task:
    """The task of a rules-table benchmark (a :class:`benchmarks.Benchmark`)."""
    name = benchmark.facts["task"]
    try:
        return TASKS[name]
    except KeyError:
        raise UserError(
            f"{benchmark.name} is a {name} benchmark; no '{name}' task is registered "
            f"(known tasks: {known_tasks()}): this workflow has no dataset reader, system under "
            f"test or '{benchmark.facts.get('accuracy', {}).get('evaluator')}' accuracy evaluator "
            f"for it (add a module under mlperf_repro/tasks/ that calls register_task)"
        ) from None


def evaluator_names() -> list[str]:
    """Every registered evaluator, in registration order."""
    return [name for task in TASKS.values() for name in task.evaluator_names]


def find_evaluator(name: str) -> tuple[Task, Evaluator]:
    """(its task, the evaluator) of a rules-table ``accuracy.evaluator`` name."""
    for task in TASKS.values():
        for evaluator in task.evaluators:
            if evaluator.name == name:
                return task, evaluator
    raise UserError(f"evaluator '{name}' is not implemented (implemented: {', '.join(evaluator_names())})")
