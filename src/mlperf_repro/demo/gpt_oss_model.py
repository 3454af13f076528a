"""Build, train and save the gpt-oss stand-in: the demo's small Llama-architecture model
trained on the harmony-format questions of :mod:`gpt_oss_corpus`.

Training, batching and the model shape are the demo's (:mod:`.model`); what differs is
the corpus, the tokenizer (harmony markers are single special tokens and ``<|return|>`` is
the EOS, as in gpt-oss) and the build report, which scores held-out questions with the
benchmark's exact-match evaluator, greedily and sampled at the benchmark's temperature.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from . import gpt_oss_corpus as corpus
from .model import BOS_ID, EOS_ID, PAD_ID, UNK_ID, DemoModelSpec, build_model, generate, train

# Ids 0-3 are the demo's unk/bos/eos/pad, so its model and training code apply unchanged;
# the EOS is harmony's <|return|>.
SPECIAL_TOKENS = ["<unk>", "<s>", corpus.RETURN, "<pad>", corpus.START, corpus.END, corpus.MESSAGE, corpus.CHANNEL]
assert (UNK_ID, BOS_ID, EOS_ID, PAD_ID) == (0, 1, 2, 3)


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE tokenizer with the harmony markers as special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token=corpus.RETURN,
        pad_token="<pad>",
        additional_special_tokens=SPECIAL_TOKENS[4:],
        model_max_length=1024,
    )


def encode_example(tokenizer, example: corpus.Example, effort: str = "high") -> tuple[list[int], list[int]]:
    """(prompt ids, answer ids + <|return|>); the prompt's system message asks for ``effort``."""
    prompt = tokenizer(corpus.format_prompt(example.question, effort), add_special_tokens=False)["input_ids"]
    answer = tokenizer(example.answer_text, add_special_tokens=False)["input_ids"] + [EOS_ID]
    return prompt, answer


def exact_match(tokenizer, outputs: list[list[int]], examples: list[corpus.Example]) -> float:
    """Share of outputs the benchmark's evaluator scores correct, in percent."""
    from ..accuracy.gpt_oss import CODE_FAMILY, is_correct
    from ..accuracy.livecodebench import parse_tests

    family = {corpus.GPQA: "gpqa", corpus.AIME: "aime", corpus.CODE: CODE_FAMILY}
    texts = tokenizer.batch_decode(outputs, skip_special_tokens=False)
    hits = 0
    for text, example in zip(texts, examples):
        # Code answers run in the evaluator's sandbox against the item's own tests.
        tests = parse_tests(example.input_output, example.ground_truth) if example.input_output else None
        hits += is_correct(family[example.dataset], text, example.ground_truth, tests)[0]
    return round(100.0 * hits / len(examples), 2)


def build_and_train(out_dir: str | Path, spec: DemoModelSpec, *, temperature: float = 1.0, log=print) -> dict:
    """Train the stand-in into ``out_dir`` (a HF checkpoint) and return a build report."""
    import torch

    torch.set_num_threads(spec.threads)
    started = time.time()
    train_examples = corpus.generate_examples(spec.train_examples, seed=spec.seed * 1000 + 21)
    eval_examples = corpus.generate_examples(spec.eval_examples, seed=spec.seed * 1000 + 23)
    tokenizer = train_tokenizer(corpus.corpus_texts(train_examples), spec.vocab_size)
    encoded = [encode_example(tokenizer, e, corpus.training_effort(i)) for i, e in enumerate(train_examples)]
    model = build_model(spec, tokenizer)
    prompts = [encode_example(tokenizer, e)[0] for e in eval_examples]
    max_answer = max(len(encode_example(tokenizer, e)[1]) for e in eval_examples) + 16

    curve = train(model, encoded, spec, log=log)
    report = {
        "spec": asdict(spec),
        "parameters": sum(p.numel() for p in model.parameters()),
        "loss_curve": curve,
        "eval_examples": spec.eval_examples,
        "exact_match_greedy": exact_match(tokenizer, generate(model, prompts, max_answer), eval_examples),
        "exact_match_sampled": exact_match(
            tokenizer, generate(model, prompts, max_answer, 64, temperature=temperature, seed=spec.seed), eval_examples
        ),
        "sampling_temperature": temperature,
    }
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    report["build_seconds"] = round(time.time() - started, 1)
    return report
