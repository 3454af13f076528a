"""harness-records: what a harness wrote beside the LoadGen logs (MLC's cpu_info.json, console
and README, the reference harness's results.json) against the system description, the
detail log, the measurements and accuracy.txt."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tree_factory import BENCH, DESCRIPTION, SUBMITTER, SYSTEM, build_tree, make_runs
from tree_factory import RULES as ROUND

from mlperf_repro.check import evidence
from mlperf_repro.check.model import PERF, load_context
from mlperf_repro.check.rules.harness_records import check_harness_records
from mlperf_repro.check.tree import check_tree
from mlperf_repro.loadgen_logs import read_detail

RESULT = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}/Offline"


def _result_value(folder: Path) -> float:
    detail = read_detail((folder / PERF).read_text().splitlines(keepends=True))
    return float(detail["result_tokens_per_second"])


def write_harness_files(folder: Path) -> None:
    """The files MLC and the reference harness write, agreeing with the tree."""
    value = _result_value(folder)
    (folder / "cpu_info.json").write_text(
        json.dumps(
            {
                "MLC_HOST_CPU_MODEL_NAME": DESCRIPTION["host_processor_model_name"],
                "MLC_HOST_CPU_SOCKETS": str(DESCRIPTION["host_processors_per_node"]),
                "MLC_HOST_CPU_PHYSICAL_CORES_PER_SOCKET": str(DESCRIPTION["host_processor_core_count"]),
            }
        )
    )
    (folder / "performance_console.out").write_text(
        f"Finished running actual test.\nResult: result_tokens_per_second: {value:.1f}, Result is VALID\n"
    )
    (folder / "README.md").write_text(
        "how to reproduce\n\n## Results\n\nModel Precision: mxfp4\n\n### Accuracy Results\n`rouge1`: `44.5`\n\n"
        f"### Performance Results\n`Tokens per second`: `{value:.1f}`\n"
    )
    summary = (folder / "performance/run_1/mlperf_log_summary.txt").read_text()
    (folder / "performance_console.out").write_text(
        (folder / "performance_console.out").read_text() + "\n" + summary.replace("=" * 48, "=" * 48, 1)
    )
    rouge = re.search(r"\{'rouge1':[^\n]*\}", (folder / "accuracy/accuracy.txt").read_text())
    (folder / "accuracy_console.out").write_text(f"Running command: evaluation.py\n{rouge.group(0)}\n")
    (folder / "os_info.json").write_text(
        json.dumps({"MLC_HOST_OS_VERSION": "24.04", "MLC_HOST_OS_KERNEL_VERSION": "6.8.0-64-generic"})
    )
    (folder / "accuracy" / "results.json").write_text(
        json.dumps({"TestScenario.Offline": {"good_items": 10, "total_items": 20}, "args": {"backend": "vllm"}})
    )


@pytest.fixture(scope="session")
def harness_tree(tmp_path_factory):
    root = build_tree(tmp_path_factory.mktemp("harness") / "tree", make_runs(tmp_path_factory.mktemp("runs")))
    desc = root / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc.write_text(
        json.dumps({**json.loads(desc.read_text()), "operating_system": "Ubuntu 24.04 (linux-6.8.0-64-generic)"})
    )
    write_harness_files(root / RESULT)
    return root


@pytest.fixture
def tree(harness_tree, tmp_path):
    copy = tmp_path / "tree"
    shutil.copytree(harness_tree, copy)
    return copy


def found(tree: Path, severity: str = "error") -> list[str]:
    return [f.line() for f in check_tree(tree, ROUND) if f.rule == "harness-records" and f.severity == severity]


def test_agreeing_harness_files_pass_and_are_read(tree):
    with evidence.reading() as reads:
        findings = [f for f in check_tree(tree, ROUND) if f.severity == "error"]
    assert findings == [], [f.line() for f in findings]
    assert {r for r in reads if r[0] in ("cpu_info.json", "performance_console.out", "results.json")}
    assert evidence.unmapped(reads) == []


def _edit_summary_line(folder: Path) -> None:
    """The run's summary edited after the run (its console keeps LoadGen's own print)."""
    summary = folder / "performance/run_1/mlperf_log_summary.txt"
    text = summary.read_text()
    line = next(line for line in text.splitlines() if line.startswith("Completed tokens per second") or ": " in line)
    label, _, value = line.partition(":")
    summary.write_text(text.replace(line, f"{label}: 1{value.strip()}", 1))


def _edit_json(path: Path, **values) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))


@pytest.mark.parametrize(
    "edit, said",
    [
        (lambda f: _edit_json(f / "cpu_info.json", MLC_HOST_CPU_MODEL_NAME="Other CPU 9000"), "'Other CPU 9000'"),
        (lambda f: _edit_json(f / "cpu_info.json", MLC_HOST_CPU_SOCKETS="1"), "counts 1 processors"),
        (lambda f: _edit_json(f / "cpu_info.json", MLC_HOST_CPU_PHYSICAL_CORES_PER_SOCKET="32"), "32 cores"),
        (
            lambda f: (f / "performance_console.out").write_text("Result: result_tokens_per_second: 1.5\n"),
            "console printed",
        ),
        (
            lambda f: (f / "README.md").write_text(
                (f / "README.md").read_text().replace("`Tokens per second`: `", "`Tokens per second`: `9")
            ),
            "Performance Results say",
        ),
        (
            lambda f: (f / "README.md").write_text((f / "README.md").read_text().replace("mxfp4", "fp16")),
            "Model Precision: fp16",
        ),
        (lambda f: _edit_json(f / "accuracy/results.json", args={"backend": "onnxruntime"}), "backend 'onnxruntime'"),
        (lambda f: _edit_json(f / "os_info.json", MLC_HOST_OS_VERSION="22.04"), "version '22.04'"),
        (lambda f: _edit_json(f / "os_info.json", MLC_HOST_OS_KERNEL_VERSION="6.17.0-14-generic"), "kernel"),
        (lambda f: _edit_summary_line(f), "LoadGen's summary line"),
        (
            lambda f: (f / "accuracy_console.out").write_text("{'rouge1': 40.0, 'gen_num': 1}\n"),
            "the evaluation's console printed",
        ),
    ],
    ids=[
        "cpu-model",
        "sockets",
        "cores",
        "console",
        "readme-figure",
        "precision",
        "backend",
        "os-version",
        "kernel",
        "summary-edited",
        "scores-edited",
    ],
)
def test_a_tree_claim_its_harness_record_contradicts(tree, edit, said):
    edit(tree / RESULT)
    lines = found(tree)
    assert any(said in line for line in lines), lines


def test_scores_raised_after_the_harness_counted_them(tree):
    folder = tree / RESULT
    txt = folder / "accuracy" / "accuracy.txt"
    txt.write_text("accuracy=55.000%, good=11, total=20\n" + txt.read_text())
    lines = found(tree)
    assert any("the harness counted 10 good of 20" in line for line in lines), lines


def test_in_open_a_contradiction_is_a_warning(tree):
    (tree / "closed").rename(tree / "open")
    desc = tree / f"open/{SUBMITTER}/systems/{SYSTEM}.json"
    _edit_json(desc, division="open")
    _edit_json(tree / f"open/{SUBMITTER}/results/{SYSTEM}/{BENCH}/Offline/cpu_info.json", MLC_HOST_CPU_SOCKETS="1")
    assert found(tree) == []
    assert any("counts 1 processors" in line for line in found(tree, "warning"))


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cpu=st.dictionaries(
        st.sampled_from(["MLC_HOST_CPU_MODEL_NAME", "MLC_HOST_CPU_SOCKETS", "MLC_HOST_CPU_PHYSICAL_CORES_PER_SOCKET"]),
        JSONISH,
    ),
    harness=JSONISH,
    console=st.text(max_size=200),
    readme=st.text(max_size=200),
)
def test_any_harness_file_is_read_or_reported_never_a_fault(tree, cpu, harness, console, readme):
    folder = tree / RESULT
    (folder / "cpu_info.json").write_text(json.dumps(cpu))
    (folder / "accuracy" / "results.json").write_text(json.dumps(harness))
    (folder / "performance_console.out").write_text(console + "\nResult: result_tokens_per_second: " + console[:8])
    (folder / "README.md").write_text("### Performance Results\n" + readme)
    ctx, problems = load_context(tree, ROUND)
    assert ctx is not None, problems
    for finding in check_harness_records(ctx):
        assert finding.rule == "harness-records" and finding.message


def test_a_host_record_missing_what_mlc_always_writes(tree):
    path = tree / RESULT / "cpu_info.json"
    data = json.loads(path.read_text())
    data.pop("MLC_HOST_CPU_SOCKETS")
    path.write_text(json.dumps(data))
    assert any("lacks MLC_HOST_CPU_SOCKETS" in line for line in found(tree))
