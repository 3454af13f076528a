"""gpt-oss's harmony prompts: our rendering equals openai-harmony's over the real o200k
vocabulary, the reasoning effort each dataset file's prompts ask for is checked before a run
(with openai-harmony or the checkpoint's tokenizer), and the vocabulary file is verified.

The real vocabulary comes from ``./install.sh --test`` (rebuilt from the npm tiktoken package,
checked against openai-harmony's sha256) or MLPERF_REPRO_HARMONY_VOCAB; without it the tests
that need it skip and say so."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
from conftest import REPO, SCHEMA

from mlperf_repro import harmony
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.demo import gpt_oss_corpus
from mlperf_repro.demo.gpt_oss_dataset import build_dataset
from mlperf_repro.demo.gpt_oss_model import train_tokenizer
from mlperf_repro.errors import UserError
from mlperf_repro.harness.dataset import load_token_dataset
from mlperf_repro.plan import Plan
from mlperf_repro.stages.runs import check_prompts

VOCAB = harmony.find_vocab(os.environ.get(harmony.VOCAB_ENV) or REPO / ".cache" / "harmony")
needs_vocab = pytest.mark.skipif(
    VOCAB is None or not VOCAB.is_file(),
    reason="the real o200k vocabulary is not here (./install.sh --test rebuilds it from the npm tiktoken package)",
)
QUESTIONS = [
    "What is 2+2?",
    "Which of these is a tool?\nA) hammer\nB) red\nC) fox\nD) river",
    "Écris un programme: lis a et b, imprime max(a, b). ∑ 数学",
]


@pytest.fixture(scope="module")
def encoding():
    return harmony.load_encoding(VOCAB)


@needs_vocab
@pytest.mark.parametrize("effort", harmony.EFFORTS)
def test_our_rendering_is_openai_harmonys(encoding, effort):
    for question in QUESTIONS:
        ours = encoding.encode(harmony.render_prompt_text(question, effort), allowed_special="all")
        assert ours == harmony.render_prompt_tokens(encoding, question, effort)


@needs_vocab
def test_efforts_read_back_from_real_o200k_tokens(encoding):
    prompts = [harmony.render_prompt_tokens(encoding, q, e) for q in QUESTIONS for e in ("low", "high")]
    efforts = harmony.prompt_efforts(prompts, harmony.harmony_decoder(encoding))
    assert efforts == ["low", "high"] * len(QUESTIONS)


def _o200k_parquet(path, encoding, efforts):
    rows = [{"input_tokens": harmony.render_prompt_tokens(encoding, QUESTIONS[0], e)} for e in efforts]
    pd.DataFrame(rows).to_parquet(path)
    return load_token_dataset(path)


@needs_vocab
def test_run_stage_check_with_openai_harmony(tmp_path, encoding):
    good = _o200k_parquet(tmp_path / "perf.parquet", encoding, ["low"] * 4)
    check_prompts(good, "perf.parquet", "unused", {"reasoning_effort": "low", "harmony_vocab": str(VOCAB.parent)})
    mixed = _o200k_parquet(tmp_path / "acc.parquet", encoding, ["high"] * 3 + ["low"])
    with pytest.raises(UserError) as err:
        check_prompts(mixed, "acc.parquet", "unused", {"reasoning_effort": "low", "harmony_vocab": str(VOCAB)})
    assert "acc.parquet" in str(err.value)
    assert "3 ask for 'high', 1 ask for 'low'" in str(err.value)


def test_reasoning_effort_is_read_from_the_system_message():
    assert harmony.reasoning_effort(harmony.render_prompt_text("q", "medium")) == "medium"
    # Only the system message counts: a user asking for "Reasoning: high" does not.
    assert harmony.reasoning_effort("<|start|>user<|message|>Reasoning: high<|end|><|start|>assistant") is None
    with pytest.raises(UserError, match="reasoning effort 'extreme'"):
        harmony.system_message("extreme")


def test_check_names_the_file_and_the_counts():
    assert harmony.check_prompt_efforts(["low", "low"], "low", "perf.parquet") == {"low": 2}
    with pytest.raises(UserError) as err:
        harmony.check_prompt_efforts(["high", None, "high"], "low", "perf/perf_eval_ref.parquet")
    message = str(err.value)
    assert "perf/perf_eval_ref.parquet" in message and "'low'" in message
    assert "2 ask for 'high', 1 ask for 'none'" in message


def test_vocabulary_file_is_verified(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        harmony.verify_vocab(tmp_path / harmony.VOCAB_FILE)
    other = tmp_path / "cl100k_base.tiktoken"
    other.write_text("IQ== 0\n")
    with pytest.raises(UserError, match="only under the name o200k_base.tiktoken"):
        harmony.verify_vocab(other)
    wrong = tmp_path / harmony.VOCAB_FILE
    wrong.write_text("IQ== 0\n")
    with pytest.raises(UserError, match="it is not o200k_base"):
        harmony.load_encoding(wrong)
    assert harmony.find_vocab(tmp_path) == wrong


def test_npm_ranks_that_are_not_o200k_leave_no_file(tmp_path):
    # The npm package's compact form: "<prefix> <first rank> <base64 token>...", one line per prefix.
    source = tmp_path / "o200k_base.json"
    source.write_text(json.dumps({"bpe_ranks": "! 0 IQ== Ig==\n# 2 Iw=="}))
    with pytest.raises(UserError, match="not the 446a9538"):
        harmony.vocab_from_npm_tiktoken(source, tmp_path / "out")
    assert not list((tmp_path / "out").iterdir())
    with pytest.raises(UserError, match="not the npm tiktoken package"):
        source.write_text("{}")
        harmony.vocab_from_npm_tiktoken(source, tmp_path / "out")


@pytest.fixture(scope="module")
def stand_in_tokenizer_dir(tmp_path_factory):
    tokenizer = train_tokenizer(gpt_oss_corpus.corpus_texts(gpt_oss_corpus.generate_examples(300, seed=3)), 600)
    path = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(path)
    return path


def test_stand_in_files_ask_for_the_rounds_efforts(tmp_path, stand_in_tokenizer_dir):
    """The stand-in's files carry the round's efforts; the run stage's check reads them with
    the checkpoint's tokenizer and refuses the accuracy file for a performance run."""
    from transformers import AutoTokenizer

    files = {"performance": "perf/p.parquet", "accuracy": "acc/a.parquet", "TEST07": "acc/c.parquet"}
    efforts = {"perf/p.parquet": "low", "acc/a.parquet": "high", "acc/c.parquet": "high"}
    build_dataset(
        tmp_path,
        files,
        AutoTokenizer.from_pretrained(stand_in_tokenizer_dir),
        samples=12,
        seed=1,
        repeats={},
        efforts=efforts,
    )
    for path, effort in efforts.items():
        dataset = load_token_dataset(tmp_path / path)
        check_prompts(dataset, path, str(stand_in_tokenizer_dir), {"reasoning_effort": effort, "harmony_vocab": None})
    with pytest.raises(UserError, match="acc/a.parquet: the round prescribes reasoning effort 'low'"):
        check_prompts(
            load_token_dataset(tmp_path / "acc/a.parquet"),
            "acc/a.parquet",
            str(stand_in_tokenizer_dir),
            {"reasoning_effort": "low", "harmony_vocab": None},
        )


def test_plan_gives_each_run_the_rounds_effort(monkeypatch, tmp_path):
    config = validate_config(load_yaml(REPO / "config" / "examples" / "gpt-oss-demo.yaml"), SCHEMA)
    bench = next(iter(config["benchmarks"]))
    monkeypatch.setenv(harmony.VOCAB_ENV, str(tmp_path))
    plan = Plan(config)
    efforts = {
        p: plan.prompt_check(bench, p)["reasoning_effort"] for p in ("performance", "accuracy", "TEST07", "TEST09")
    }
    assert efforts == {"performance": "low", "accuracy": "high", "TEST07": "high", "TEST09": "low"}
    # A stand-in's prompts are not o200k ids: the vocabulary never applies to them.
    assert plan.prompt_check(bench, "performance")["harmony_vocab"] is None
    files = plan.dataset_build_args(config["benchmarks"][bench]["dataset"])
    assert set(files["efforts"].values()) == {"low", "high"}
    # A real download gets the configured vocabulary.
    dataset = config["benchmarks"][bench]["dataset"]
    config["datasets"][dataset] = {"source": "file:///data/gpt-oss", "file": "perf/perf_eval_ref.parquet"}
    assert Plan(config).prompt_check(bench, "accuracy") == {"reasoning_effort": "high", "harmony_vocab": str(tmp_path)}


def test_llama2_has_no_prompt_check():
    config = validate_config(load_yaml(REPO / "config" / "config.yaml"), SCHEMA)
    plan = Plan(config)
    llama2 = [b for b, cfg in config["benchmarks"].items() if cfg["mlperf_benchmark"].startswith("llama2")]
    assert llama2 and all(plan.prompt_check(b) is None for b in llama2)
