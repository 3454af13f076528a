"""Dataset files as tables: what the harness's token reader (``harness.dataset``) and the
gpt-oss evaluator (``accuracy.gpt_oss``) both read."""

from __future__ import annotations

from pathlib import Path

from .errors import UserError

#: The columns that hold a row's prompt token ids (OpenOrca's tok_input, the gpt-oss parquet's input_tokens).
PROMPT_COLUMNS = ("tok_input", "input_tokens")


def read_table(path: str | Path):
    """A dataset file as a DataFrame: ``.parquet`` files with pyarrow, anything else as a
    pandas pickle (the OpenOrca ``.pkl``)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"dataset file {path} does not exist (check datasets.<name>.file in the config, and the "
            "benchmark's dataset files in the rules table)"
        )
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_pickle(path)
    except ImportError as exc:
        raise UserError(f"reading {path} needs {exc.name or 'pyarrow'} (pip install -r envs/workflow.txt)") from exc
    except Exception as exc:  # pickle and pyarrow raise many kinds for a damaged file
        raise UserError(f"cannot read dataset file {path}: {exc}") from exc
