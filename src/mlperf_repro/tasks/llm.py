"""The LLM task (llama2-70b, gpt-oss-120b): token-id prompts in, token ids out.

Datasets are MLCommons' processed OpenOrca pickle or the gpt-oss parquet files; the SUT
reports first tokens and int32 token outputs (harness.sut.LlmSut); accuracy is ROUGE
against the OpenOrca references (llama2) or exact match per dataset family (gpt-oss).
"""

from __future__ import annotations

import os
from typing import Any

from .registry import Evaluator, Task, register_task


def read_dataset(path: str, limit: int | None = None):
    from ..harness.dataset import load_token_dataset

    return load_token_dataset(path, limit)


def make_sut(dataset, *, report_first_token: bool):
    from ..harness.sut import LlmSut

    return LlmSut(dataset, report_first_token=report_first_token)


def make_backend(engine: dict[str, Any], *, model_path: str, generation: dict[str, Any], stream: bool, sut):
    """vLLM in process or the endpoints head, reporting first tokens (streamed scenarios) and
    token outputs to the LLM SUT."""
    from ..backends import GenerationSettings
    from ..backends import make_backend as make_llm_backend

    return make_llm_backend(
        engine,
        model_path=model_path,
        generation=GenerationSettings(**generation),
        stream=stream,
        on_first_tokens=sut.first_tokens if stream else None,
        on_completions=sut.completions,
    )


def score_llama2_rouge(
    entries: list, dataset_file: str, tokenizer: Any, accuracy_rules: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    from ..accuracy.llama2 import evaluate_llama2, format_accuracy_txt

    metrics = evaluate_llama2(entries, read_dataset(dataset_file).references, tokenizer)
    return metrics, format_accuracy_txt(metrics)


def score_gpt_oss_exact_match(
    entries: list, dataset_file: str, tokenizer: Any, accuracy_rules: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    from ..accuracy.gpt_oss import evaluate_gpt_oss, format_gpt_oss_accuracy_txt, load_gpt_oss_rows

    # The release the rules table names: the config's own datasets entry (required), else
    # where the dataset folder carries it.
    release = accuracy_rules.get("livecodebench_release")
    if release and not release.get("required") and not os.path.isdir(release["folder"]):
        release = None
    rows = load_gpt_oss_rows(
        dataset_file,
        accuracy_rules["families"],
        lcb_release=release and release["folder"],
        lcb_version=release and release["version"],
    )
    result = evaluate_gpt_oss(
        entries,
        rows,
        tokenizer,
        families=accuracy_rules["families"],
        repeats=accuracy_rules.get("dataset_repeats", {}),
        allow_unsandboxed=bool(accuracy_rules.get("allow_unsandboxed_code", False)),
    )
    return result, format_gpt_oss_accuracy_txt(result)


def _slow_tokenizer(tokenizer_dir: str):
    from ..accuracy.tokenizers import load_tokenizer

    return load_tokenizer(tokenizer_dir)


def _fast_tokenizer(tokenizer_dir: str):
    from ..accuracy.tokenizers import load_fast_tokenizer

    return load_fast_tokenizer(tokenizer_dir)


def reference_outputs(
    model_dir: str, dataset, *, generation: dict[str, Any], engine: dict[str, Any], out_dir, reporter
):
    """The unquantized model's token ids for every prompt, from vLLM's own generate in this
    process (no LoadGen: nothing is timed); ``out_dir`` gets nothing (the scores need none)."""
    import numpy as np

    from .. import progress
    from ..backends import GenerationSettings
    from ..backends.vllm_engine import create_llm, sampling_params

    reporter.phase("loading the model", waiting_for="vLLM to load the unquantized model")
    llm = create_llm(model_dir, engine.get("engine_args", {}))
    reporter.phase(None)
    # vLLM's own per-prompt progress hook (its tqdm factory), counted into our lines.
    outputs = llm.generate(
        [{"prompt_token_ids": p} for p in dataset.prompts],
        sampling_params(GenerationSettings(**generation), stream=False),
        use_tqdm=progress.EngineBar.into(reporter),
    )
    entries = [(i, np.asarray(o.outputs[0].token_ids, dtype=np.int32)) for i, o in enumerate(outputs)]
    return entries, llm.get_tokenizer()


LLM = register_task(
    Task(
        name="llm",
        read_dataset=read_dataset,
        make_sut=make_sut,
        make_backend=make_backend,
        backends=("vllm", "endpoints"),
        evaluators=(
            # The llama2 reference keeps the first log entry per sample, the gpt-oss one
            # scores every entry.
            Evaluator("llama2-rouge", score_llama2_rouge, _slow_tokenizer, first_per_sample=True),
            Evaluator("gpt-oss-exact-match", score_gpt_oss_exact_match, _fast_tokenizer, first_per_sample=False),
        ),
        accuracy_log_dtype="int32",  # LoadGen token responses (harness.sut)
        compliance=("TEST04", "TEST06", "TEST07", "TEST09"),
        reference_outputs=reference_outputs,
    )
)
