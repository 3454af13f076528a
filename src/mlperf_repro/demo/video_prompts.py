"""A prompt file in the layout of wan-2.2's ``data/vbench_prompts.txt``: one prompt per line,
the sample index being the line's. The prompts are short scene descriptions in VBench's style
("a red fox walking through a snowy forest, cinematic"), drawn from a seed, so the same file
is written on every machine. The default size is the round's 248, so the samples whose
videos the accuracy folder must carry (up to index 233) exist.
"""

from __future__ import annotations

import random
from pathlib import Path

SUBJECTS = [
    "a red fox", "a sailing boat", "a hot air balloon", "an old tram", "a golden retriever",
    "a panda", "a lighthouse", "a skateboarder", "a flock of birds", "a steaming cup of coffee",
    "a vintage car", "a koi fish", "a paper lantern", "a snowboarder", "a windmill",
]  # fmt: skip
ACTIONS = [
    "moving slowly", "turning around", "drifting past", "gliding forward", "standing still",
    "spinning gently", "rising up", "rolling along",
]  # fmt: skip
PLACES = [
    "in a snowy forest", "on a calm lake", "above a desert at dawn", "through a busy street",
    "in a sunlit meadow", "by the sea at night", "under cherry blossoms", "in a rainy city",
]  # fmt: skip
STYLES = ["", ", cinematic", ", in watercolor style", ", timelapse", ", close-up shot", ", aerial view"]


def generate_prompts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(ACTIONS)} {rng.choice(PLACES)}{rng.choice(STYLES)}" for _ in range(count)
    ]


def write_prompt_file(path: str | Path, count: int = 248, seed: int = 7) -> int:
    """Write ``count`` prompts to ``path``; returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{p}\n" for p in generate_prompts(count, seed)), encoding="utf-8")
    return count
