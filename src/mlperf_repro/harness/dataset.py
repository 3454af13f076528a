"""Datasets the harness serves: MLCommons' processed OpenOrca pickle (llama2-70b), the
gpt-oss-120b parquet files (token ids), and prompt text files (text-to-video: one prompt
per line, the sample index being the line's, as in wan-2.2's ``vbench_prompts.txt``).

The harness needs only the prompts' token ids: ``tok_input`` (OpenOrca, and gpt-oss files
before v4.0) or ``input_tokens`` (gpt-oss v4.0+). ``references`` holds the OpenOrca
``output`` column, which the llama2 evaluator scores against (empty for gpt-oss, whose
evaluator reads ``dataset`` and ``ground_truth`` itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..dataset_files import PROMPT_COLUMNS, read_table
from ..errors import UserError


@dataclass
class TokenDataset:
    prompts: list[list[int]]
    references: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.prompts)


def load_token_dataset(path: str | Path, limit: int | None = None) -> TokenDataset:
    frame = read_table(path)
    column = next((c for c in PROMPT_COLUMNS if c in frame.columns), None)
    if column is None:
        raise UserError(
            f"dataset {path} has none of the prompt token columns {list(PROMPT_COLUMNS)}; expected the "
            "processed OpenOrca layout (tok_input, output) or a gpt-oss file (input_tokens)"
        )
    if limit is not None:
        frame = frame.iloc[:limit]
    return TokenDataset(
        prompts=[[int(t) for t in ids] for ids in frame[column]],
        references=[str(text) for text in frame["output"]] if "output" in frame.columns else [],
    )


@dataclass
class PromptDataset:
    """Text prompts; the sample index is the prompt's line among the non-empty lines."""

    prompts: list[str]

    def __len__(self) -> int:
        return len(self.prompts)


def load_prompt_dataset(path: str | Path, limit: int | None = None) -> PromptDataset:
    """A prompt file as the wan-2.2 reference reads it: UTF-8, one prompt per line, each
    stripped, empty lines dropped."""
    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"prompt file {path} does not exist (check datasets.<name>.file in the config, and the "
            "benchmark's dataset file in the rules table)"
        )
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise UserError(f"prompt file {path} is not UTF-8 text: {exc}") from exc
    prompts = [line.strip() for line in lines if line.strip()]
    if not prompts:
        raise UserError(f"prompt file {path} holds no prompt (one per line expected)")
    return PromptDataset(prompts[:limit] if limit is not None else prompts)
