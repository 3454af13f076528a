"""Token datasets in the layout of MLCommons' processed OpenOrca pickle."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

REQUIRED_COLUMNS = ("tok_input", "output")


@dataclass
class TokenDataset:
    prompts: list[list[int]]
    references: list[str]

    def __len__(self) -> int:
        return len(self.prompts)


def load_token_dataset(path: str | Path, limit: int | None = None) -> TokenDataset:
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise UserError(f"dataset file {path} does not exist (check datasets.<name>.file in the config)")
    frame = pd.read_pickle(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise UserError(f"dataset {path} lacks column(s) {missing}; expected the processed OpenOrca layout")
    if limit is not None:
        frame = frame.iloc[:limit]
    return TokenDataset(
        prompts=[[int(t) for t in ids] for ids in frame["tok_input"]],
        references=[str(text) for text in frame["output"]],
    )
