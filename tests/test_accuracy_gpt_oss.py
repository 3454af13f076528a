"""gpt-oss-120b exact-match evaluation and TEST07: answer extraction as the reference
eval_mlperf_accuracy.py does it, scoring of real LoadGen accuracy logs of tokenized outputs,
accuracy.txt as the checker reads it, and the TEST07 folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlperf_repro.accuracy.gpt_oss import (
    evaluate_gpt_oss,
    family_of,
    load_gpt_oss_rows,
    parse_aime_answer,
    parse_multiple_choice,
)
from mlperf_repro.accuracy.loadgen_log import read_accuracy_log
from mlperf_repro.benchmarks import load_round
from mlperf_repro.demo import gpt_oss_corpus
from mlperf_repro.demo.gpt_oss_model import train_tokenizer
from mlperf_repro.errors import UserError
from mlperf_repro.stages.accuracy import accuracy_job
from mlperf_repro.stages.compliance import verify_job

FACTS = load_round("v6.0").benchmark("gpt-oss-120b")
FAMILIES = FACTS.accuracy["families"]
REPEATS = FACTS.accuracy["dataset_repeats"]
TEST07 = load_round("v6.0").compliance_test("TEST07")

FINAL = "<|channel|>analysis<|message|>{analysis}<|end|><|start|>assistant<|channel|>final<|message|>{final}<|return|>"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A real byte-level BPE tokenizer with harmony's markers as special tokens (the stand-in's)."""
    texts = gpt_oss_corpus.corpus_texts(gpt_oss_corpus.generate_examples(400, seed=5))
    tokenizer = train_tokenizer(texts, vocab_size=600)
    path = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


def accuracy_job_args(run: Path, dataset: Path, tokenizer_dir: Path, out: Path) -> dict:
    """The accuracy job's arguments for a gpt-oss run folder, scored against the round's targets
    into out/accuracy.txt and out/accuracy.json."""
    return dict(
        run_dir=str(run),
        dataset_file=str(dataset),
        tokenizer_dir=str(tokenizer_dir),
        evaluator="gpt-oss-exact-match",
        targets={
            "kind": "reference",
            "targets": FACTS.absolute_targets(),
            "upper_bounds": FACTS.accuracy["upper_bound"],
        },
        reference_path=None,
        out_txt=str(out / "accuracy.txt"),
        out_json=str(out / "accuracy.json"),
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        # The final channel decides, not a draft answer in the analysis.
        (FINAL.format(analysis="Option A looks right. Answer: A", final="**C**"), "C"),
        # A corrupted final marker still opens the final channel.
        ("<|channel|>analysis<|message|>hmm<|end|><|channel|>final 明<|message|>b<|return|>", "B"),
        # No leading letter: "Answer: X" inside the final channel.
        (FINAL.format(analysis="A", final="The options were compared. Answer: D"), "D"),
        # The reference's leading-letter rule reads the article "A" as the choice.
        (FINAL.format(analysis="x", final="A careful look shows C"), "A"),
        # Not harmony, and "Answer: X" is first in the text: it wins.
        ("Answer: B is tempting, but FINAL ANSWER: C", "B"),
        # Not harmony: a parenthesised letter only the last-ANSWER rule reads.
        ("Reasoning first. Maybe ANSWER (A)? No: FINAL ANSWER: (C)", "C"),
        # Out of GPQA's range.
        (FINAL.format(analysis="x", final="E"), None),
        ("", None),
    ],
)
def test_multiple_choice_extraction(text, expected):
    assert parse_multiple_choice(text, "D") == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"first \boxed{12}, then \boxed{ 345 }", 345),  # the last boxed integer
        (r"\boxed{7} ... Answer: 9", 7),  # boxed wins over Answer:
        ("so the Answer: 42\nand more", 42),
        ("Answer: 3.5", None),  # not an integer
        ("Answer: 1000", None),  # AIME answers are 0..999
        ("no number here", None),
    ],
)
def test_aime_extraction(text, expected):
    assert parse_aime_answer(text) == expected


def test_family_is_the_first_table_key_the_name_contains():
    assert family_of("GPQA_Diamond", FAMILIES) == "gpqa"
    assert family_of("mmlu_pro_math", FAMILIES) == "mmlu_pro"
    assert family_of("aime25", FAMILIES) == "aime"
    with pytest.raises(UserError):
        family_of("humaneval", FAMILIES)


def write_accuracy_log(path, tokenizer, outputs, qsl_indices=None):
    """A LoadGen mlperf_log_accuracy.json: int32 token ids as upper-case hex, one object per sample."""
    entries = []
    for seq, text in enumerate(outputs):
        ids = np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int32)
        qsl = seq if qsl_indices is None else qsl_indices[seq]
        entries.append({"seq_id": seq, "qsl_idx": qsl, "data": ids.tobytes().hex().upper(), "token_count": len(ids)})
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in entries) + "\n]\n")
    return path


def score(log, dataset, tokenizer, **options):
    """The evaluator on a written accuracy log and dataset file, every entry counted."""
    return evaluate_gpt_oss(
        read_accuracy_log(log, first_per_sample=False),
        load_gpt_oss_rows(dataset),
        tokenizer,
        families=FAMILIES,
        repeats=REPEATS,
        **options,
    )


def write_dataset(path, rows):
    pd.DataFrame([{"dataset": d, "ground_truth": g, "input_tokens": [1, 2, 3]} for d, g in rows]).to_parquet(path)
    return path


def test_scoring_weights_each_family_by_its_repeats(tmp_path, tokenizer):
    # 8 AIME rows (4 right) and 5 GPQA rows (all right): 4/8 + 5/5 of 8/8 + 5/5 = 75%, where an
    # unweighted mean would give 9/13.
    rows = [("aime25", "417")] * 8 + [("gpqa_diamond", "B")] * 5
    outputs = (
        [FINAL.format(analysis="The fox has tag 417.", final=r"\boxed{417}")] * 4
        + [FINAL.format(analysis="The fox has tag 417.", final=r"\boxed{418}")] * 4
        + [FINAL.format(analysis="The colour is red, option A.", final="B")] * 5
    )
    log = write_accuracy_log(tmp_path / "mlperf_log_accuracy.json", tokenizer, outputs)
    result = evaluate_gpt_oss(
        read_accuracy_log(log, first_per_sample=False),
        load_gpt_oss_rows(write_dataset(tmp_path / "acc.parquet", rows)),
        tokenizer,
        families=FAMILIES,
        repeats=REPEATS,
    )
    assert result["exact_match"] == 75.0
    assert result["per_dataset"] == {
        "aime25": {"correct": 4, "total": 8, "repeats": 8},
        "gpqa_diamond": {"correct": 5, "total": 5, "repeats": 5},
    }
    lengths = [len(tokenizer(o, add_special_tokens=False)["input_ids"]) for o in outputs]
    assert result["tokens_per_sample"] == round(sum(lengths) / len(lengths), 1)


def test_every_log_entry_counts_even_a_repeated_sample(tmp_path, tokenizer):
    rows = [("gpqa_diamond", "A"), ("gpqa_diamond", "B")]
    outputs = [
        FINAL.format(analysis="x", final="A"),
        FINAL.format(analysis="x", final="C"),
        FINAL.format(analysis="x", final="A"),
    ]
    log = write_accuracy_log(tmp_path / "log.json", tokenizer, outputs, qsl_indices=[0, 1, 0])
    result = evaluate_gpt_oss(
        read_accuracy_log(log, first_per_sample=False),
        load_gpt_oss_rows(write_dataset(tmp_path / "d.parquet", rows)),
        tokenizer,
        families=FAMILIES,
        repeats=REPEATS,
    )
    assert result["exact_match"] == round(100 * 2 / 3, 3) and result["gen_num"] == 3


def test_livecodebench_rows_are_scored_by_running_their_tests(tmp_path, tokenizer):
    """Code rows run in the sandbox against the row's tests; weights as for the other families:
    2 of 4 LiveCodeBench entries right (repeats 3) and 1 GPQA of 1 (repeats 5)."""
    sample = json.dumps({"inputs": ["2 3\n", "10 -4\n"], "outputs": ["5\n", "6\n"], "fn_name": None})
    frame = pd.DataFrame(
        [
            {"dataset": "livecodebench_v6", "ground_truth": "abc123", "input_output": sample},
            {"dataset": "gpqa_diamond", "ground_truth": "B", "input_output": None},
        ]
    )
    dataset = tmp_path / "acc.parquet"
    frame.to_parquet(dataset)
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    wrong = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"
    outputs = [
        FINAL.format(analysis="sum them", final=right),
        FINAL.format(analysis=right, final=wrong),  # the final channel's program counts
        FINAL.format(analysis="sum them", final="Sorry, no code."),
        FINAL.format(analysis="x", final="B"),
        FINAL.format(analysis="sum them", final=right),
    ]
    log = write_accuracy_log(tmp_path / "log.json", tokenizer, outputs, qsl_indices=[0, 0, 0, 1, 0])
    result = score(log, dataset, tokenizer, code_workers=2)
    assert result["per_dataset"] == {
        "gpqa_diamond": {"correct": 1, "total": 1, "repeats": 5},
        "livecodebench_v6": {"correct": 2, "total": 4, "repeats": 3},
    }
    assert result["exact_match"] == round(100 * (2 / 3 + 1 / 5) / (4 / 3 + 1 / 5), 3)
    # The entries whose program ran (not the one without code), by the sandbox mode they ran in.
    ((mode, entries),) = result["sandbox"]["isolation"].items()
    assert entries == [0, 1, 4] and mode in ("namespaces+seccomp", "namespaces", "seccomp")
    assert result["sandbox"]["unsandboxed"] is False


def test_without_isolation_code_is_run_only_when_the_config_accepts_it(tmp_path, tokenizer, tokenizer_dir, monkeypatch):
    """No namespaces and no seccomp filter here (both made unavailable): the accuracy job refuses
    to run the model's program, unless the rules the plan hands it carry the config's
    acceptance; the record and accuracy.txt then say so."""
    from mlperf_repro.accuracy import sandbox

    sample = json.dumps({"inputs": ["2 3\n"], "outputs": ["5\n"], "fn_name": None})
    dataset = tmp_path / "acc.parquet"
    pd.DataFrame([{"dataset": "livecodebench_v6", "ground_truth": "q1", "input_output": sample}]).to_parquet(dataset)
    run = tmp_path / "run"
    run.mkdir()
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    write_accuracy_log(run / "mlperf_log_accuracy.json", tokenizer, [FINAL.format(analysis="sum", final=right)])
    job = accuracy_job_args(run, dataset, tokenizer_dir, tmp_path)
    probes = (sandbox.isolation_problem, sandbox.bwrap_program, sandbox._filter)
    for cached in probes:
        cached.cache_clear()
    monkeypatch.setattr(sandbox, "bwrap_program", lambda: None)
    monkeypatch.setattr(sandbox, "_filter", lambda pid_namespace: None)
    try:
        with pytest.raises(UserError, match="refusing to run model-written code.*sandbox.allow_unsandboxed"):
            accuracy_job(**job, accuracy_rules=FACTS.accuracy)
        record = accuracy_job(**job, accuracy_rules={**FACTS.accuracy, "allow_unsandboxed_code": True})
    finally:
        for cached in probes:
            cached.cache_clear()
    assert record["sandbox"] == {"isolation": {"unsandboxed": [0]}, "unsandboxed": True}
    assert "sandbox" not in record["metrics"] and json.loads((tmp_path / "accuracy.json").read_text()) == record
    assert "evaluated WITHOUT ISOLATION" in (tmp_path / "accuracy.txt").read_text()


def test_livecodebench_rows_without_tests_are_refused_with_the_file_named(tmp_path, tokenizer):
    rows = [("gpqa_diamond", "A"), ("livecodebench_v6", "abc123")]
    log = write_accuracy_log(tmp_path / "log.json", tokenizer, ["A", "```python\nprint(1)\n```"])
    dataset = write_dataset(tmp_path / "acc_eval_inputs.parquet", rows)
    with pytest.raises(UserError, match=r"acc_eval_inputs\.parquet.*livecodebench_v6.*input_output"):
        score(log, dataset, tokenizer)


def test_math500_rows_are_scored_by_their_boxed_answer(tmp_path, tokenizer):
    rows = [("gpqa_diamond", "A"), ("math500", r"\frac{1}{2}"), ("math500", "(x+1)^2"), ("math500", "7")]
    outputs = ["A", r"so \boxed{0.5}", r"\boxed{x^2+2x+1}", "seven, unboxed"]
    log = write_accuracy_log(tmp_path / "log.json", tokenizer, outputs)
    result = score(log, write_dataset(tmp_path / "acc_eval_inputs.parquet", rows), tokenizer)
    assert result["per_dataset"]["math500"] == {"correct": 2, "total": 3, "repeats": 1}
    # gpqa_diamond counts 1/5 (its repeats): (1/5 + 2) / (1/5 + 3).
    assert result["exact_match"] == round(100 * 2.2 / 3.2, 3)


def test_accuracy_txt_is_read_by_the_checker_patterns(tmp_path, tokenizer, tokenizer_dir):
    rows = [("gpqa_diamond", "A")] * 3 + [("aime25", "12")]
    outputs = [FINAL.format(analysis="x", final=f) for f in ("A", "A", "D", r"\boxed{12}")]
    run = tmp_path / "run"
    run.mkdir()
    write_accuracy_log(run / "mlperf_log_accuracy.json", tokenizer, outputs)
    dataset = write_dataset(tmp_path / "acc.parquet", rows)
    record = accuracy_job(**accuracy_job_args(run, dataset, tokenizer_dir, tmp_path), accuracy_rules=FACTS.accuracy)
    # 2/5 + 1/8 of 3/5 + 1/8
    assert record["metrics"]["exact_match"] == round(100 * (2 / 5 + 1 / 8) / (3 / 5 + 1 / 8), 3)
    assert not record["verdict"]["passed"]  # 72.4 < 99% of 83.13
    # The official checker matches its patterns line by line from the start of a line.
    lines = (tmp_path / "accuracy.txt").read_text().splitlines()
    for metric, pattern in FACTS.accuracy["regex"].items():
        found = [re.match(".*" + pattern + ".*", line) for line in lines]
        values = [float(m.group(1)) for m in found if m]
        assert values == [record["metrics"][metric]], metric


def _compliance_run(run, tokenizer, outputs, sampling_target):
    run.mkdir()
    write_accuracy_log(run / "mlperf_log_accuracy.json", tokenizer, outputs)
    (run / "mlperf_log_detail.txt").write_text(
        ":::MLLOG " + json.dumps({"key": "effective_accuracy_log_sampling_target", "value": sampling_target}) + "\n"
    )
    (run / "mlperf_log_summary.txt").write_text("Result is : VALID\n")


@pytest.mark.parametrize("right, passed", [(4, True), (2, False)])
def test_test07_scores_the_compliance_set_and_writes_the_checker_folder(
    tmp_path, tokenizer, tokenizer_dir, right, passed
):
    # 5 GPQA rows: 80% passes the 60.698 threshold, 40% does not.
    dataset = write_dataset(tmp_path / "acc_eval_compliance_gpqa.parquet", [("gpqa_diamond", "C")] * 5)
    outputs = [FINAL.format(analysis="x", final="C" if i < right else "A") for i in range(5)]
    run = tmp_path / "TEST07_run"
    _compliance_run(run, tokenizer, outputs, TEST07["audit_config"]["accuracy_log_sampling_target"])
    out = tmp_path / "TEST07"
    assert (
        verify_job(
            "TEST07",
            str(run),
            "Offline",
            str(tokenizer_dir),
            TEST07,
            str(out),
            dataset_file=str(dataset),
            tokenizer_dir=str(tokenizer_dir),
            evaluator="gpt-oss-exact-match",
            accuracy_rules=FACTS.accuracy,
        )
        is passed
    )
    text = (out / TEST07["verify_file"]).read_text()
    assert f"'exact_match': {100.0 * right / 5}" in text
    assert f"Accuracy threshold: {TEST07['accuracy_threshold']}" in text
    assert text.splitlines()[-1] == ("TEST PASS" if passed else "TEST FAIL")
    assert (out / "accuracy" / "mlperf_log_accuracy.json").read_bytes() == (
        run / "mlperf_log_accuracy.json"
    ).read_bytes()
    assert sorted(p.name for p in (out / "performance" / "run_1").iterdir()) == [
        "mlperf_log_detail.txt",
        "mlperf_log_summary.txt",
    ]


def test_test07_refuses_a_run_without_the_audit_config(tmp_path, tokenizer, tokenizer_dir):
    dataset = write_dataset(tmp_path / "c.parquet", [("gpqa_diamond", "C")])
    run = tmp_path / "run"
    _compliance_run(run, tokenizer, [FINAL.format(analysis="x", final="C")], 0)
    with pytest.raises(UserError, match="audit.config"):
        verify_job(
            "TEST07",
            str(run),
            "Offline",
            str(tokenizer_dir),
            TEST07,
            str(tmp_path / "out"),
            dataset_file=str(dataset),
            tokenizer_dir=str(tokenizer_dir),
            evaluator="gpt-oss-exact-match",
            accuracy_rules=FACTS.accuracy,
        )


def test_example_config_runs_on_the_table_files_and_test_scale_counts():
    from conftest import REPO, SCHEMA

    from mlperf_repro.config import load_yaml, validate_config
    from mlperf_repro.plan import Plan

    config = validate_config(load_yaml(REPO / "config/examples/gpt-oss-demo.yaml"), SCHEMA)
    plan = Plan(config)
    folder = "resources/datasets/gpt-oss-synthetic"
    assert plan.dataset_file("tiny-gpt-oss", "performance") == f"{folder}/perf/perf_eval_ref.parquet"
    assert plan.dataset_file("tiny-gpt-oss", "accuracy") == f"{folder}/acc/acc_eval_inputs.parquet"
    assert plan.dataset_file("tiny-gpt-oss", "TEST07") == f"{folder}/acc/acc_eval_compliance_gpqa.parquet"
    assert plan.dataset_file("tiny-gpt-oss", "TEST09") == f"{folder}/perf/perf_eval_ref.parquet"
    assert plan.dataset_build_args("gpt-oss-synthetic")["repeats"] == REPEATS
    # Test scale: its own Offline query count, not gpt-oss's 6396 (which a full-scale run gets).
    assert plan.user_conf_settings("cpu-2c-vllm", "tiny-gpt-oss", "Offline")["min_query_count"] == 200
    config["test_scale"]["enabled"] = False
    assert Plan(config).user_conf_settings("cpu-2c-vllm", "tiny-gpt-oss", "Offline")["min_query_count"] == 6396
    targets = Plan(config).accuracy_targets("tiny-gpt-oss")
    assert targets["upper_bounds"] == {"tokens_per_sample": 10998.9}
    # Running model-written code unsandboxed reaches the evaluator only when the config says so
    # (and the default leaves the job's parameters as they were).
    assert "allow_unsandboxed_code" not in plan.accuracy_rules("tiny-gpt-oss")
    # The LiveCodeBench release the round names: without a datasets entry of its own, looked for
    # inside the dataset folder (an input), where it may be absent (the parquet's own columns).
    assert plan.accuracy_rules("tiny-gpt-oss")["livecodebench_release"] == {
        "version": "release_v6",
        "folder": f"{folder}/livecodebench/release_v6",
        "required": False,
    }
    config["sandbox"] = {"allow_unsandboxed": True}
    assert Plan(validate_config(config, SCHEMA)).accuracy_rules("tiny-gpt-oss")["allow_unsandboxed_code"] is True


def test_stand_in_files_have_the_layout_and_exact_counts(tmp_path, tokenizer):
    from mlperf_repro.demo.gpt_oss_dataset import build_dataset

    files = {
        "performance": "perf/p.parquet",
        "accuracy": "acc/a.parquet",
        "TEST07": "acc/c.parquet",
        "TEST09": "perf/p.parquet",
    }
    written = build_dataset(
        tmp_path, files, tokenizer, samples=30, seed=1, repeats=REPEATS, rows={"accuracy": 37, "TEST07": 12}
    )
    assert written == {"perf/p.parquet": 30, "acc/a.parquet": 37, "acc/c.parquet": 12}
    accuracy = pd.read_parquet(tmp_path / "acc/a.parquet")
    assert set(accuracy["dataset"]) == {"aime25", "gpqa_diamond", "livecodebench_v6"}
    # Only the code rows carry tests.
    assert accuracy["input_output"].notna().tolist() == (accuracy["dataset"] == "livecodebench_v6").tolist()
    # Each question repeated as the table says (the last one may be cut short).
    blocks = (accuracy["question"] != accuracy["question"].shift()).cumsum()
    sizes = accuracy.groupby(blocks).agg(n=("question", "size"), family=("dataset", "first"))
    assert all(row.n == REPEATS[row.family] for row in sizes.iloc[:-1].itertuples())
    compliance = pd.read_parquet(tmp_path / "acc/c.parquet")
    assert set(compliance["dataset"]) == {"gpqa_diamond"}
    # Prompts are the tokenized text, and the ground truth is what the evaluator reads.
    row = compliance.iloc[0]
    assert tokenizer.decode(list(row["input_tokens"])) == row["text_input"]
    assert row["ground_truth"] in "ABCD" and f"({row['ground_truth']})" in row["question"]


@pytest.mark.slow
def test_stand_in_code_rows_have_real_tests_the_taught_program_passes(tmp_path, tokenizer):
    """The builder's LiveCodeBench rows: their tests are real (the program the corpus teaches
    passes them in the sandbox, another operation's program fails them), and the evaluator
    scores a file of them from the ``input_output`` column."""
    from mlperf_repro.accuracy.livecodebench import grade_many, parse_tests
    from mlperf_repro.demo.gpt_oss_dataset import build_dataset

    build_dataset(tmp_path, {"performance": "p.parquet"}, tokenizer, samples=60, seed=3, repeats=REPEATS)
    frame = pd.read_parquet(tmp_path / "p.parquet")
    code = frame[frame["dataset"] == "livecodebench_v6"]
    assert len(code) >= 5 and code["ground_truth"].str.len().min() > 0
    items, wrong = [], []
    for row in code.itertuples():
        operation = row.ground_truth.split("-")[1]
        other = next(o for o in sorted(gpt_oss_corpus.OPERATIONS) if o != operation)
        suite = parse_tests(row.input_output, f"row {row.Index}")
        assert len(suite) == gpt_oss_corpus.CODE_TESTS and suite.fn_name is None
        items.append((gpt_oss_corpus.program(operation), suite))
        wrong.append((gpt_oss_corpus.program(other), suite))
    verdicts = grade_many(items + wrong, workers=2)
    assert [v.passed for v in verdicts[: len(items)]] == [True] * len(items), verdicts
    # A program for another operation fails at least one of the four tests (two operations
    # agree only on special pairs, e.g. a - b and max(a, b) when b is 0; never on all four here).
    assert not any(v.passed for v in verdicts[len(items) :]), verdicts
    # The answer the model is taught, scored end to end by the evaluator.
    outputs = [
        gpt_oss_corpus.Example("", "", "a", f"```python\n{program}\n```", "").answer_text for program, _ in items
    ]
    log = write_accuracy_log(tmp_path / "log.json", tokenizer, outputs, qsl_indices=list(code.index))
    result = evaluate_gpt_oss(
        read_accuracy_log(log, first_per_sample=False),
        load_gpt_oss_rows(tmp_path / "p.parquet"),
        tokenizer,
        families=FAMILIES,
        repeats=REPEATS,
        code_workers=2,
    )
    assert result["exact_match"] == 100.0 and result["per_dataset"]["livecodebench_v6"]["total"] == len(code)


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_test07_run_covers_a_compliance_set_smaller_than_the_performance_sample_count(tmp_path, scenario):
    """gpt-oss's mlperf.conf asks for 6396 performance samples; TEST07's set is smaller (990 rows
    in the real download, 32 here). Real LoadGen, with the table's audit.config: every sample
    is issued once and logged (LoadGen crashed before the harness loaded the whole set)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from mlperf_repro.compliance import audit_config_text

    out = tmp_path / "TEST07"
    env = dict(
        os.environ,
        HARNESS_MODEL="gpt-oss-120b",
        HARNESS_CONF=f"gpt-oss-120b.{scenario}.performance_sample_count_override = 6396\n",
        HARNESS_AUDIT=audit_config_text("TEST07", TEST07["audit_config"]),
    )
    child = Path(__file__).with_name("harness_child.py")
    result = subprocess.run(
        [sys.executable, str(child), str(out), scenario, "performance", "5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    logged = [e["qsl_idx"] for e in json.loads((out / "mlperf_log_accuracy.json").read_text())]
    assert sorted(logged) == list(range(32))


def test_a_published_table_is_scored_with_the_tests_of_the_livecodebench_release(tmp_path, tokenizer):
    """The accuracy parquet as published names its LiveCodeBench items only by question_id;
    LiveCodeBench's release folder (code_generation_lite's test*.jsonl) gives their tests, as
    the reference looks them up, with no column joined by hand. An id the release lacks is
    named; a file's own test column still takes precedence."""
    from test_accuracy_lcb_release import problem, write_release

    release = write_release(tmp_path / "lcb", [[problem("abc123")], [], [], [], [], [problem("q-call", call=True)]])
    rows = [("livecodebench_v6", "abc123"), ("gpqa_diamond", "B"), ("livecodebench_v6", "q-call")]
    dataset = write_dataset(tmp_path / "acc_eval_inputs.parquet", rows)
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    call = "```python\nclass Solution:\n    def add(self, a, b):\n        return a + b\n```"
    outputs = [
        FINAL.format(analysis="x", final=right),
        FINAL.format(analysis="x", final="B"),
        FINAL.format(analysis="x", final=call),
    ]
    log = write_accuracy_log(tmp_path / "log.json", tokenizer, outputs)
    loaded = load_gpt_oss_rows(dataset, FAMILIES, lcb_release=release, lcb_version="release_v6")
    result = evaluate_gpt_oss(
        read_accuracy_log(log, first_per_sample=False), loaded, tokenizer, families=FAMILIES, repeats=REPEATS
    )
    assert result["per_dataset"]["livecodebench_v6"] == {"correct": 2, "total": 2, "repeats": 3}

    missing = write_dataset(tmp_path / "other.parquet", [*rows, ("livecodebench_v6", "not-in-v6")])
    with pytest.raises(UserError, match=r"other\.parquet: 1 LiveCodeBench row\(s\).*release_v6.*: not-in-v6;"):
        load_gpt_oss_rows(missing, FAMILIES, lcb_release=release, lcb_version="release_v6")
    # An id padded with spaces is the id; a missing one (a parquet null) is no id, scored
    # incorrect, not looked up as "nan" or "None": the evaluator's own reading of ground_truth.
    odd = write_dataset(
        tmp_path / "odd.parquet",
        [("livecodebench_v6", " abc123 "), ("livecodebench_v6", None), ("livecodebench_v6", float("nan"))],
    )
    joined = load_gpt_oss_rows(odd, FAMILIES, lcb_release=release, lcb_version="release_v6").tests
    assert joined[0]["public_test_cases"] == problem("abc123")["public_test_cases"] and joined[1:] == [None, None]


def _one_right_sum_run(tmp_path: Path, dataset: Path, tokenizer, tokenizer_dir) -> dict:
    """The accuracy job's arguments for a run that answered one stdin LiveCodeBench item
    (read two integers, print their sum) with a right program."""
    run = tmp_path / "run"
    run.mkdir()
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    write_accuracy_log(run / "mlperf_log_accuracy.json", tokenizer, [FINAL.format(analysis="sum", final=right)])
    return accuracy_job_args(run, dataset, tokenizer_dir, tmp_path)


def test_the_accuracy_job_finds_the_release_the_plan_names_in_the_dataset_folder(tmp_path, tokenizer, tokenizer_dir):
    """Through the accuracy job: the plan's rules name the release folder inside the dataset
    folder (the rules table's dataset.livecodebench_release), and a published table is scored
    from it; without the folder, the error says where the release belongs."""
    from test_accuracy_lcb_release import problem, write_release

    folder = tmp_path / "dataset"
    release = write_release(folder / "livecodebench/release_v6", [[problem("abc123")], [], [], [], [], []])
    dataset = write_dataset(folder / "acc_eval_inputs.parquet", [("livecodebench_v6", "abc123")])
    job = _one_right_sum_run(tmp_path, dataset, tokenizer, tokenizer_dir)
    named = {"version": "release_v6", "folder": str(release)}
    record = accuracy_job(**job, accuracy_rules={**FACTS.accuracy, "livecodebench_release": named})
    assert record["metrics"]["per_dataset"]["livecodebench_v6"]["correct"] == 1
    absent = {"version": "release_v6", "folder": str(tmp_path / "nowhere")}
    with pytest.raises(UserError, match="dataset.livecodebench_release.folder"):
        accuracy_job(**job, accuracy_rules={**FACTS.accuracy, "livecodebench_release": absent})


def test_the_release_is_its_own_pinned_dataset_entry(tmp_path, tokenizer, tokenizer_dir, default_config):
    """A partner with the published accuracy parquet and LiveCodeBench's release, each acquired
    against its checksums as its own datasets entry (benchmarks.<b>.livecodebench_release):
    the plan hands the accuracy and TEST07 jobs the release's folder as an input and a rule, the
    job joins and scores with no manual step; a release the job cannot find is an error, not
    a silent fallback to the parquet's columns, and a bad key is one message naming it."""
    import copy

    from conftest import REPO, SCHEMA
    from test_accuracy_lcb_release import problem, write_release

    from mlperf_repro.config import load_yaml, validate_config
    from mlperf_repro.fetch.entries import acquire_dataset_entry
    from mlperf_repro.hashing import sha256_file
    from mlperf_repro.plan import Plan

    hub = write_release(tmp_path / "hub/code_generation_lite", [[problem("abc123")], [], [], [], [], [problem("q9")]])
    manifest = tmp_path / "hub/lcb.sha256"
    manifest.write_text("".join(f"{sha256_file(p)}  {p.name}\n" for p in sorted(hub.iterdir())))
    config = load_yaml(REPO / "config/examples/gpt-oss-demo.yaml")
    bench = next(name for name, b in config["benchmarks"].items() if b["mlperf_benchmark"] == "gpt-oss-120b")
    entry = {"source": f"file://{hub}", "file": "test.jsonl", "sha256_manifest": str(manifest)}
    config["datasets"]["lcb-release-v6"] = entry
    config["benchmarks"][bench]["livecodebench_release"] = "lcb-release-v6"
    validate_config(copy.deepcopy(config), SCHEMA)
    plan = Plan(config)
    rules = plan.accuracy_rules(bench)
    assert rules["livecodebench_release"] == {
        "version": "release_v6",
        "folder": plan.dataset_dir("lcb-release-v6"),
        "required": True,
    }
    assert plan.accuracy_datasets(bench) == [plan.dataset_dir("lcb-release-v6")]

    acquired = tmp_path / plan.dataset_dir("lcb-release-v6")
    record = acquire_dataset_entry(entry, acquired, tmp_path / "record.json", None)
    assert record["status"] == "verified"
    (tmp_path / "acc").mkdir()
    dataset = write_dataset(tmp_path / "acc/acc_eval_inputs.parquet", [("livecodebench_v6", "abc123")])
    job = _one_right_sum_run(tmp_path, dataset, tokenizer, tokenizer_dir)
    named = {**rules["livecodebench_release"], "folder": str(acquired)}
    done = accuracy_job(**job, accuracy_rules={**rules, "livecodebench_release": named})
    assert done["metrics"]["per_dataset"]["livecodebench_v6"] == {"correct": 1, "total": 1, "repeats": 3}
    with pytest.raises(UserError, match=r"nowhere"):
        accuracy_job(
            **job, accuracy_rules={**rules, "livecodebench_release": {**named, "folder": str(tmp_path / "nowhere")}}
        )

    for key, value, message in (
        ("livecodebench_release", "no-such-entry", r"livecodebench_release: 'no-such-entry' is not a datasets entry"),
    ):
        bad = copy.deepcopy(config)
        bad["benchmarks"][bench][key] = value
        with pytest.raises(UserError, match=message):
            validate_config(bad, SCHEMA)
    llama = next(name for name, b in default_config["benchmarks"].items() if b["mlperf_benchmark"].startswith("llama2"))
    bad = copy.deepcopy(default_config)
    bad["benchmarks"][llama]["livecodebench_release"] = next(iter(bad["datasets"]))
    with pytest.raises(UserError, match=r"scores no LiveCodeBench items"):
        validate_config(bad, SCHEMA)


@pytest.mark.slow
def test_the_release_entry_is_acquired_before_the_jobs_that_score(tmp_path):
    """The DAG: the release's datasets entry is acquired, and the accuracy and TEST07 jobs wait
    for it (an input, so a changed release reruns them)."""
    import yaml
    from conftest import REPO, make_workdir, run_snakemake
    from test_accuracy_lcb_release import problem, write_release

    from mlperf_repro.config import load_yaml

    hub = write_release(tmp_path / "hub", [[problem("abc123")], [], [], [], [], []])
    config = load_yaml(REPO / "config/examples/gpt-oss-demo.yaml")
    config["datasets"]["lcb-release-v6"] = {"source": f"file://{hub}", "file": "test.jsonl", "allow_unverified": True}
    config["benchmarks"]["tiny-gpt-oss"]["livecodebench_release"] = "lcb-release-v6"
    work = make_workdir(tmp_path)
    (work / "lcb.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(work, "-n", "-p", "--cores", "2", "--configfile", "lcb.yaml", timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = result.stdout.split("\n\n")
    acquire = [j for j in jobs if "rule acquire_dataset:" in j and "resources/datasets/lcb-release-v6" in j]
    assert len(acquire) == 1
    scoring = [j for j in jobs if "rule accuracy_eval:" in j or ("rule compliance_verify:" in j and "TEST07" in j)]
    assert scoring and all("resources/datasets/lcb-release-v6" in j.split("output:")[0] for j in scoring)
