"""The evaluators' tokenizer loaders: for the demo models' tokenizer.json-only tokenizers they
skip AutoTokenizer (whose imports pull in torch) and must build the very tokenizer
AutoTokenizer builds; anything else still goes through AutoTokenizer."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from mlperf_repro.accuracy.tokenizers import _tokenizers_backend, load_fast_tokenizer, load_tokenizer
from mlperf_repro.demo import corpus, gpt_oss_corpus
from mlperf_repro.demo import gpt_oss_model as gpt_oss_demo
from mlperf_repro.demo import model as llama_demo


def _save(path, tokenizer, model_type: str):
    tokenizer.save_pretrained(path)
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    """The tiny Llama stand-in's tokenizer, saved as the demo build saves it."""
    texts = corpus.corpus_texts(corpus.generate_examples(300, seed=3))
    return _save(tmp_path_factory.mktemp("llama"), llama_demo.train_tokenizer(texts, 500), "llama")


@pytest.fixture(scope="module")
def gpt_oss_dir(tmp_path_factory):
    """The gpt-oss stand-in's tokenizer (harmony markers as special tokens)."""
    texts = gpt_oss_corpus.corpus_texts(gpt_oss_corpus.generate_examples(300, seed=3))
    return _save(tmp_path_factory.mktemp("gpt_oss"), gpt_oss_demo.train_tokenizer(texts, 600), "gpt_oss")


def _assert_same(direct, auto) -> None:
    assert type(direct) is type(auto)
    assert direct.backend_tokenizer.to_str() == auto.backend_tokenizer.to_str()
    mine = {k: repr(v) for k, v in vars(direct).items() if k != "_tokenizer"}
    theirs = {k: repr(v) for k, v in vars(auto).items() if k != "_tokenizer"}
    assert mine == theirs
    rng = random.Random(5)
    ids = [[rng.randrange(len(auto)) for _ in range(rng.randint(0, 80))] for _ in range(200)]
    for skip in (True, False):
        assert direct.batch_decode(ids, skip_special_tokens=skip) == auto.batch_decode(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("which", ["llama_dir", "gpt_oss_dir"])
def test_direct_load_is_what_auto_tokenizer_builds(which, request):
    from transformers import AutoTokenizer

    path = str(request.getfixturevalue(which))
    assert _tokenizers_backend(path) is not None
    _assert_same(
        load_tokenizer(path),
        AutoTokenizer.from_pretrained(path, model_max_length=2048, padding_side="left", use_fast=False),
    )
    _assert_same(load_fast_tokenizer(path), AutoTokenizer.from_pretrained(path))


def test_other_folders_go_through_auto_tokenizer(llama_dir, tmp_path):
    def variant(name, edit):
        folder = tmp_path / name
        folder.mkdir()
        for item in llama_dir.iterdir():
            (folder / item.name).write_bytes(item.read_bytes())
        edit(folder)
        return str(folder)

    def set_config(key, value, file="config.json"):
        def edit(folder):
            data = json.loads((folder / file).read_text())
            data[key] = value
            (folder / file).write_text(json.dumps(data))

        return edit

    # A model type AutoTokenizer may override the named class for, a remote-code map, a
    # Mistral tekken.json, no config.json: AutoTokenizer decides.
    assert _tokenizers_backend(variant("qwen2", set_config("model_type", "qwen2"))) is None
    assert _tokenizers_backend(variant("mapped", set_config("auto_map", {}, "tokenizer_config.json"))) is None
    assert _tokenizers_backend(variant("tekken", lambda f: (f / "tekken.json").write_text("{}"))) is None
    assert _tokenizers_backend(variant("no-config", lambda f: (f / "config.json").unlink())) is None
    assert _tokenizers_backend(str(tmp_path / "missing")) is None


def test_loading_the_demo_tokenizer_imports_no_torch(llama_dir):
    code = (
        "import sys; from mlperf_repro.accuracy.tokenizers import load_tokenizer; "
        f"load_tokenizer({str(llama_dir)!r}); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_demo_encodes_its_examples_in_a_batch_as_one_at_a_time():
    """The tiny Llama's training data is encoded in two batched calls: the same token ids as
    encoding each prompt and answer alone (so the trained model is the same)."""
    examples = corpus.generate_examples(300, seed=4)
    tokenizer = llama_demo.train_tokenizer(corpus.corpus_texts(examples), 500)
    one_at_a_time = [
        (
            tokenizer(corpus.format_prompt(e.system_prompt, e.question), add_special_tokens=False)["input_ids"],
            tokenizer(e.output, add_special_tokens=False)["input_ids"] + [llama_demo.EOS_ID],
        )
        for e in examples
    ]
    assert llama_demo.encode_examples(tokenizer, examples) == one_at_a_time
    assert llama_demo.encode_example(tokenizer, examples[7]) == one_at_a_time[7]
