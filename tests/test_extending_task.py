"""Adding a benchmark task is one module that calls register_task plus one rules-table entry.

A toy "echo" task (its SUT would answer each prompt with the prompt itself) lives in a
module written by the test; a toy benchmark of that task is added to a copy of the real
v6.0 table. Preflight must accept it once the module is imported (and name the task as
unknown before), and the evaluate stage must score its accuracy log with the task's
evaluator, reading the log as the task's data type.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys

import numpy as np
import pytest
import yaml
from conftest import SCHEMA, model_load_per_run, with_artifacts

from mlperf_repro import benchmarks
from mlperf_repro.check.preflight import preflight
from mlperf_repro.config import validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.plan import Plan
from mlperf_repro.stages.accuracy import accuracy_job, score_log
from mlperf_repro.tasks import TASKS, task_for

SYSTEM, BENCH = "cpu-2c-vllm", "tiny-llama-mxfp4"
ROUND, TOY = "v99.0", "echo-tiny"  # the toy round: v6.0 plus the toy benchmark

# The whole task: dataset reader, SUT factory, evaluator, log data type, compliance tests.
ECHO_MODULE = """
import json
from dataclasses import dataclass

from mlperf_repro.tasks import Evaluator, Task, register_task


@dataclass
class EchoDataset:
    prompts: list

    def __len__(self):
        return len(self.prompts)


def read_dataset(path, limit=None):
    with open(path) as f:
        prompts = json.load(f)["prompts"]
    return EchoDataset(prompts[:limit] if limit is not None else prompts)


def make_sut(dataset, *, report_first_token):
    raise NotImplementedError("the toy task is never run under LoadGen")


def score_exact_echo(entries, dataset_file, tokenizer, accuracy_rules):
    prompts = read_dataset(dataset_file).prompts
    correct = sum(1 for idx, tokens in entries if [int(t) for t in tokens] == prompts[idx])
    metrics = {"exact_echo": round(100.0 * correct / len(entries), 4)}
    return metrics, f"{metrics}\\n"


ECHO = register_task(
    Task(
        name="echo",
        read_dataset=read_dataset,
        make_sut=make_sut,
        backends=("vllm",),
        evaluators=(Evaluator("echo-exact", score_exact_echo, first_per_sample=True),),
        accuracy_log_dtype="int64",
        compliance=("TEST04",),
    )
)
"""


@pytest.fixture
def toy_round(tmp_path, monkeypatch):
    """The real v6.0 table plus one benchmark of task "echo", as rounds/v99.0.yaml."""
    table = yaml.safe_load((benchmarks.ROUNDS_DIR / "v6.0.yaml").read_text())
    toy = copy.deepcopy(table["benchmarks"]["llama2-70b-99"])
    toy["task"] = "echo"
    toy["accuracy"] = {
        "evaluator": "echo-exact",
        "reference": {"exact_echo": 100.0},
        "target_fraction": 0.99,
        "targets": ["exact_echo"],
        "regex": {"exact_echo": "'exact_echo':\\s([\\d.]+)"},
    }
    toy["compliance"] = ["TEST04"]
    table["round"] = ROUND
    table["benchmarks"][TOY] = toy
    rounds = tmp_path / "rounds"
    rounds.mkdir()
    (rounds / f"{ROUND}.yaml").write_text(yaml.safe_dump(table, sort_keys=False))
    monkeypatch.setattr(benchmarks, "ROUNDS_DIR", rounds)
    benchmarks.load_round.cache_clear()
    yield table
    benchmarks.load_round.cache_clear()


@pytest.fixture
def echo_module(tmp_path, monkeypatch):
    """Import the toy task's module (registering it); unregister it afterwards."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "echo_task.py").write_text(ECHO_MODULE)
    monkeypatch.syspath_prepend(str(modules))
    module = importlib.import_module("echo_task")
    yield module
    TASKS.pop("echo", None)
    sys.modules.pop("echo_task", None)


def toy_config(default_config):
    model_load_per_run(default_config)  # the echo task serves in-process (backend vllm) only
    default_config["round"] = ROUND
    default_config["benchmarks"][BENCH]["mlperf_benchmark"] = TOY
    return validate_config(default_config, SCHEMA)


def support(findings):
    return [f for f in findings if f.rule == "support"]


def test_unregistered_task_is_named_with_the_known_ones(tmp_path, toy_round, default_config):
    plan = Plan(toy_config(default_config))
    with pytest.raises(UserError) as err:
        task_for(plan.facts(BENCH))
    assert "echo-tiny is a echo benchmark" in str(err.value) and "known tasks: llm" in str(err.value)
    findings = support(preflight(plan.config, tmp_path))
    assert [f.path for f in findings] == [f"benchmarks.{BENCH}.mlperf_benchmark"]
    assert "no 'echo' task is registered" in findings[0].message and "'echo-exact'" in findings[0].message


def test_registered_task_passes_preflight(tmp_path, toy_round, echo_module, default_config):
    config = toy_config(default_config)
    assert task_for(Plan(config).facts(BENCH)) is echo_module.ECHO
    findings = preflight(config, with_artifacts(tmp_path))
    assert [f for f in findings if f.severity == "error"] == [], findings


def test_preflight_checks_the_task_s_evaluator_compliance_and_backends(
    tmp_path, toy_round, echo_module, default_config, monkeypatch
):
    toy_round["benchmarks"][TOY]["accuracy"]["evaluator"] = "echo-fuzzy"
    toy_round["benchmarks"][TOY]["compliance"] = ["TEST04", "TEST06"]
    (benchmarks.ROUNDS_DIR / f"{ROUND}.yaml").write_text(yaml.safe_dump(toy_round, sort_keys=False))
    benchmarks.load_round.cache_clear()
    config = toy_config(default_config)
    monkeypatch.setitem(config["systems"][SYSTEM]["engine"], "backend", "endpoints")
    messages = [f.message for f in support(preflight(config, with_artifacts(tmp_path)))]
    assert len(messages) == 3, messages
    assert "'echo-fuzzy' accuracy evaluator" in messages[0] and "implemented: echo-exact" in messages[0]
    assert "compliance TEST06" in messages[1] and "runs for echo benchmarks: TEST04" in messages[1]
    assert "backend 'endpoints' cannot serve echo-tiny" in messages[2]


def test_accuracy_evaluation_dispatches_to_the_task(tmp_path, toy_round, echo_module, default_config):
    plan = Plan(toy_config(default_config))
    facts = plan.facts(BENCH)
    prompts = [[5, 6, 7], [8, 9], [70000, 1], [4]]
    dataset = tmp_path / "echo.json"
    dataset.write_text(json.dumps({"prompts": prompts}))
    # The SUT's answers: three echoes and one wrong answer, as int64 (the task's log type;
    # 70000 does not survive being read as int32 pairs).
    answers = [prompts[0], prompts[1], prompts[2], [3]]
    run = tmp_path / "run"
    run.mkdir()
    log = [
        {"seq_id": i, "qsl_idx": i, "data": np.asarray(a, dtype=np.int64).tobytes().hex(), "token_count": len(a)}
        for i, a in enumerate(answers)
    ]
    (run / "mlperf_log_accuracy.json").write_text(json.dumps(log))

    evaluator = facts.accuracy["evaluator"]
    metrics, text = score_log(evaluator, run / "mlperf_log_accuracy.json", str(dataset), "unused", facts.accuracy)
    assert metrics == {"exact_echo": 75.0} and text == "{'exact_echo': 75.0}\n"

    record = accuracy_job(
        run_dir=str(run),
        dataset_file=str(dataset),
        tokenizer_dir="unused",  # the echo evaluator needs no tokenizer
        evaluator=evaluator,
        targets={"kind": "reference", "targets": facts.absolute_targets()},  # the table's 99%
        reference_path=None,
        out_txt=str(tmp_path / "accuracy.txt"),
        out_json=str(tmp_path / "accuracy.json"),
        accuracy_rules=facts.accuracy,
    )
    assert record["verdict"]["checks"] == [{"metric": "exact_echo", "value": 75.0, "minimum": 99.0, "passed": False}]
    assert (tmp_path / "accuracy.txt").read_text() == text


def test_unknown_evaluator_names_the_implemented_ones(tmp_path, echo_module):
    with pytest.raises(UserError, match="evaluator 'clip-score' is not implemented .*echo-exact"):
        score_log("clip-score", tmp_path / "log.json", "data.json", "tok", {})
