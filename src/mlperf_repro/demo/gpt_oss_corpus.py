"""Synthetic questions shaped like the gpt-oss-120b evaluation sets, with harmony-format answers.

Two families, named as in the real files so the evaluator's rules apply unchanged:

* ``gpqa_diamond``: a four-option multiple-choice question ("Which of these is a colour?")
  where exactly one option belongs to the asked category; the ground truth is its letter.
* ``aime25``: an integer question (a few things carry three-digit tags; which tag has the
  asked one?); the ground truth is that integer, 0-999.

The answer is a deterministic function of the question, so a small model can learn it.
Answers use gpt-oss's harmony layout: an ``analysis`` channel, then the ``final`` channel
the evaluator reads (``B``, or ``\\boxed{417}``), ended by ``<|return|>`` (the EOS).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# Harmony markers; each is one special token of the stand-in's tokenizer.
START, END, MESSAGE, CHANNEL, RETURN = "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>"

CATEGORIES = {
    "colour": ["red", "blue", "green", "yellow", "purple", "orange", "silver", "black", "white", "brown"],
    "animal": ["fox", "otter", "heron", "badger", "lynx", "beaver", "falcon", "rabbit", "turtle", "walrus"],
    "place": ["forest", "river", "desert", "valley", "meadow", "harbor", "canyon", "island", "village", "garden"],
    "food": ["berries", "fish", "seeds", "insects", "grass", "roots", "nuts", "leaves", "honey", "clams"],
    "tool": ["hammer", "saw", "wrench", "drill", "chisel", "shovel", "ladder", "needle", "rake", "pliers"],
}
LETTERS = "ABCD"
GPQA, AIME = "gpqa_diamond", "aime25"


@dataclass(frozen=True)
class Example:
    dataset: str
    question: str
    analysis: str
    final: str
    ground_truth: str

    @property
    def answer_text(self) -> str:
        """The model's output without its EOS: analysis channel, then the final channel."""
        return (f"{CHANNEL}analysis{MESSAGE}{self.analysis}{END}"
                f"{START}assistant{CHANNEL}final{MESSAGE}{self.final}")


def _multiple_choice(rng: random.Random) -> Example:
    category, *others = rng.sample(sorted(CATEGORIES), 4)
    options = [rng.choice(CATEGORIES[category])] + [rng.choice(CATEGORIES[c]) for c in others]
    order = list(range(4))
    rng.shuffle(order)
    shuffled = [options[i] for i in order]
    letter = LETTERS[order.index(0)]
    lines = "\n".join(f"({LETTERS[i]}) {word}" for i, word in enumerate(shuffled))
    question = f"Which of these is a {category}?\n{lines}\nAnswer with the letter of the correct option."
    return Example(GPQA, question, f"The {category} is {options[0]}, option {letter}.", letter, letter)


def _integer(rng: random.Random) -> Example:
    names = rng.sample(CATEGORIES["animal"], 3)
    tags = [rng.randint(100, 999) for _ in names]
    asked = rng.randrange(3)
    facts = ", ".join(f"the {n} has tag {t}" for n, t in zip(names, tags))
    question = (f"Each animal carries a tag: {facts}. What is the tag of the {names[asked]}? "
                "Give the answer as an integer from 0 to 999.")
    value = tags[asked]
    return Example(AIME, question, f"The {names[asked]} has tag {value}.", f"\\boxed{{{value}}}", str(value))


FAMILIES = {GPQA: _multiple_choice, AIME: _integer}


def generate_examples(n: int, seed: int, families: tuple[str, ...] = (GPQA, AIME)) -> list[Example]:
    """``n`` examples of the given families, identical for the same seed on every machine."""
    rng = random.Random(seed)
    return [FAMILIES[rng.choice(families)](rng) for _ in range(n)]


def format_prompt(question: str) -> str:
    """A harmony user turn, then the assistant's turn opened for the model."""
    return f"{START}user{MESSAGE}{question}{END}{START}assistant"


def corpus_texts(examples: list[Example]) -> list[str]:
    """Texts a tokenizer is trained on: every prompt and answer."""
    return [format_prompt(e.question) + e.answer_text + RETURN for e in examples]
