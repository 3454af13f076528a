"""Write the synthetic OpenOrca-shaped evaluation set as MLCommons' processed pickle."""

from __future__ import annotations

from pathlib import Path

from . import corpus


def build_dataset(out_file: str | Path, tokenizer, *, samples: int, seed: int) -> int:
    """Tokenise ``samples`` held-out examples with the model's tokenizer into a pandas pickle.

    Columns follow processorca.py: id, system_prompt, question, output, input,
    tok_input, tok_output, tok_input_length, tok_output_length, origin.
    """
    import pandas as pd

    examples = corpus.generate_examples(samples, seed=seed)
    rows = []
    for index, example in enumerate(examples):
        prompt = corpus.format_prompt(example.system_prompt, example.question)
        tok_input = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        tok_output = tokenizer(example.output, add_special_tokens=False)["input_ids"]
        rows.append(
            {
                "id": f"synthetic.{seed}.{index}",
                "system_prompt": example.system_prompt,
                "question": example.question,
                "output": example.output,
                "input": prompt,
                "tok_input": tok_input,
                "tok_output": tok_output,
                "tok_input_length": len(tok_input),
                "tok_output_length": len(tok_output),
                "origin": "synthetic",
            }
        )
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_pickle(out_file, protocol=4)
    return len(rows)
