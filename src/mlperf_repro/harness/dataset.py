"""Token datasets the harness serves: MLCommons' processed OpenOrca pickle (llama2-70b) and
the gpt-oss-120b parquet files.

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
