"""Write the gpt-oss stand-in's evaluation files in the layout of the gpt-oss-120b download.

Columns as in the real parquet files: ``dataset`` (family name), ``question``,
``ground_truth``, ``text_input`` (the formatted prompt), ``input_tokens`` (its token ids)
and ``num_tokens``, plus ``input_output``: a LiveCodeBench row's tests as lcb_runner's
evaluation sample (JSON text; null on the other rows), which the evaluator runs the model's
program against. Like the real sets, the accuracy file repeats each question (AIME 8 times,
GPQA 5 times, LiveCodeBench 3 times: the table's ``dataset_repeats``) and the compliance
file holds GPQA questions only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from . import gpt_oss_corpus as corpus


def _rows(examples: list[corpus.Example], tokenizer, effort: str) -> list[dict]:
    rows = []
    for example in examples:
        prompt = corpus.format_prompt(example.question, effort)
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        rows.append(
            {
                "dataset": example.dataset,
                "question": example.question,
                "ground_truth": example.ground_truth,
                "text_input": prompt,
                "input_tokens": ids,
                "num_tokens": len(ids),
                "input_output": example.input_output or None,
            }
        )
    return rows


def _repeated(examples: list[corpus.Example], repeats: Mapping[str, int]) -> list[corpus.Example]:
    return [e for e in examples for _ in range(repeats.get(e.dataset, 1))]


def build_dataset(
    out_dir: str | Path,
    files: Mapping[str, str],
    tokenizer,
    *,
    samples: int,
    seed: int,
    repeats: Mapping[str, int],
    rows: Mapping[str, int] | None = None,
    efforts: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Write one parquet file per purpose; ``files`` maps performance, accuracy and any
    compliance test to a path inside ``out_dir`` (several purposes may share one file).
    Each file has about ``samples`` rows, or exactly ``rows[purpose]`` where given (the
    last question's repeats are then cut short). ``efforts`` maps a file to the harmony
    reasoning effort its prompts ask for (the rules table's; by default low for the
    performance file, high for the others, as in the round). Returns rows per file."""
    import pandas as pd

    out_dir = Path(out_dir)
    rows = rows or {}
    kinds: dict[str, tuple[str, int | None]] = {}
    for purpose, path in files.items():
        kind = purpose if purpose in ("performance", "accuracy") else "compliance"
        # A compliance test that runs on the performance set shares its file.
        if path == files.get("performance"):
            kind = "performance"
        kinds.setdefault(path, (kind, rows.get(purpose)))
    written = {}
    for path, (kind, exact) in sorted(kinds.items()):
        wanted = exact or samples
        if kind == "performance":
            examples = corpus.generate_examples(wanted, seed=seed * 100 + 1)
        elif kind == "accuracy":
            # Exact: enough questions even if all repeat the fewest times, cut to size below.
            counts = [repeats.get(family, 1) for family in corpus.FAMILIES]
            per_question = min(counts) if exact else sum(counts) / len(counts)
            examples = _repeated(
                corpus.generate_examples(max(1, int(wanted / per_question)) + 1, seed=seed * 100 + 2), repeats
            )
        else:
            examples = _repeated(
                corpus.generate_examples(
                    max(1, wanted // repeats.get(corpus.GPQA, 1)) + bool(exact),
                    seed=seed * 100 + 3,
                    families=(corpus.GPQA,),
                ),
                repeats,
            )
        if exact:
            examples = examples[:exact]  # the last question's repeats may be cut short
        target = out_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        effort = (efforts or {}).get(path) or ("low" if kind == "performance" else "high")
        pd.DataFrame(_rows(examples, tokenizer, effort)).to_parquet(target, index=False)
        written[path] = len(examples)
    return written
