"""Synthetic questions shaped like the gpt-oss-120b evaluation sets, with harmony-format answers.

Three families, named as in the real files so the evaluator's rules apply unchanged:

* ``gpqa_diamond``: a four-option multiple-choice question ("Which of these is a tool?")
  where exactly one option belongs to the asked category. The correct option always sits
  at its category's letter (tools at A, colours at B, ...); the ground truth is that letter.
* ``aime25``: an integer question about a registry of fixed three-digit numbers ("What is
  the registry number of the otter?"); the ground truth is that number, 0-999.
* ``livecodebench_v6``: a stdin/stdout programming task on two integers ("print the larger
  of a and b"); the answer is a two-line Python program in a ```` ```python ```` block, the
  ground truth a question id (as in the real file) and the row's ``input_output`` carries
  real tests (lcb_runner's ``{"inputs", "outputs", "fn_name": null}``) that the evaluator
  runs the program against in its sandbox. The program depends only on the asked operation.

The answer is a deterministic function of the question that a model of a couple of
million parameters learns in a few hundred CPU training steps (it needs no copying from
the prompt, which such a model does not learn that fast). Answers use gpt-oss's harmony
layout: an ``analysis`` channel, then the ``final`` channel the evaluator reads (``B``,
``\\boxed{417}`` or the program's block), ended by ``<|return|>`` (the EOS).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from .. import harmony

# Harmony markers; each is one special token of the stand-in's tokenizer.
START, END, MESSAGE = harmony.START, harmony.END, harmony.MESSAGE
CHANNEL, RETURN = "<|channel|>", "<|return|>"

CATEGORIES = {
    "colour": ["red", "blue", "green", "yellow", "purple", "orange", "silver", "black", "white", "brown"],
    "animal": ["fox", "otter", "heron", "badger", "lynx", "beaver", "falcon", "rabbit", "turtle", "walrus"],
    "place": ["forest", "river", "desert", "valley", "meadow", "harbor", "canyon", "island", "village", "garden"],
    "food": ["berries", "fish", "seeds", "insects", "grass", "roots", "nuts", "leaves", "honey", "clams"],
    "tool": ["hammer", "saw", "wrench", "drill", "chisel", "shovel", "ladder", "needle", "rake", "pliers"],
}
LETTERS = "ABCD"
GPQA, AIME, CODE = "gpqa_diamond", "aime25", "livecodebench_v6"


@dataclass(frozen=True)
class Example:
    dataset: str
    question: str
    analysis: str
    final: str
    ground_truth: str
    #: LiveCodeBench rows only: the item's tests as lcb_runner's evaluation sample (JSON text,
    #: the real files' ``input_output`` column); empty for the other families.
    input_output: str = ""

    @property
    def answer_text(self) -> str:
        """The model's output without its EOS: analysis channel, then the final channel."""
        return f"{CHANNEL}analysis{MESSAGE}{self.analysis}{END}{START}assistant{CHANNEL}final{MESSAGE}{self.final}"


# The letter the correct option of each category's question sits at.
ANSWER_LETTER = {"tool": "A", "colour": "B", "animal": "C", "place": "D", "food": "A"}


def _registry() -> dict[str, int]:
    """The fixed three-digit number of every animal and place (the AIME family's facts)."""
    rng = random.Random(1234)
    names = CATEGORIES["animal"] + CATEGORIES["place"]
    return dict(zip(names, rng.sample(range(100, 1000), len(names))))


REGISTRY = _registry()


def _multiple_choice(rng: random.Random) -> Example:
    category = rng.choice(sorted(CATEGORIES))
    others = rng.sample([c for c in sorted(CATEGORIES) if c != category], 3)
    letter = ANSWER_LETTER[category]
    distractors = [rng.choice(CATEGORIES[c]) for c in others]
    options = (
        distractors[: LETTERS.index(letter)] + [rng.choice(CATEGORIES[category])] + distractors[LETTERS.index(letter) :]
    )
    lines = "\n".join(f"({LETTERS[i]}) {word}" for i, word in enumerate(options))
    question = f"Which of these is a {category}?\n{lines}\nAnswer with the letter of the correct option."
    analysis = f"The question asks for a {category}; the {category} is option {letter}."
    return Example(GPQA, question, analysis, letter, letter)


def _integer(rng: random.Random) -> Example:
    name = rng.choice(sorted(REGISTRY))
    kind = "animal" if name in CATEGORIES["animal"] else "place"
    visitor = rng.choice(CATEGORIES["animal"])
    setting = (
        f"A {visitor} travels past the {name}."
        if kind == "place"
        else f"The {name} lives near the {rng.choice(CATEGORIES['place'])}."
    )
    question = (
        f"{setting} Every animal and place has a registry number. What is the registry number of the "
        f"{name}? Give the answer as an integer from 0 to 999."
    )
    value = REGISTRY[name]
    return Example(AIME, question, f"The registry number of the {name} is {value}.", f"\\boxed{{{value}}}", str(value))


# The operations of the code family: (how the task names it, the expression the program prints).
OPERATIONS = {
    "sum": "a + b",
    "difference": "a - b",
    "product": "a * b",
    "larger": "max(a, b)",
    "smaller": "min(a, b)",
}
_APPLY = {
    "sum": lambda a, b: a + b,
    "difference": lambda a, b: a - b,
    "product": lambda a, b: a * b,
    "larger": max,
    "smaller": min,
}
CODE_TESTS = 4


def program(operation: str) -> str:
    """The correct (and taught) program for an operation of the code family."""
    return f"a, b = map(int, input().split())\nprint({OPERATIONS[operation]})"


def _code(rng: random.Random) -> Example:
    operation = rng.choice(sorted(OPERATIONS))
    what = {"larger": "the larger of a and b", "smaller": "the smaller of a and b"}.get(
        operation, f"the {operation} of a and b" if operation != "difference" else "a minus b"
    )
    pairs = [(rng.randint(-99, 99), rng.randint(-99, 99)) for _ in range(CODE_TESTS)]
    tests = {
        "inputs": [f"{a} {b}\n" for a, b in pairs],
        "outputs": [f"{_APPLY[operation](a, b)}\n" for a, b in pairs],
        "fn_name": None,
    }
    first = pairs[0]
    question = (
        f"Write a Python program. The input is one line with two integers a and b. Print {what}.\n"
        f"Example input: {first[0]} {first[1]}\nExample output: {_APPLY[operation](*first)}"
    )
    return Example(
        CODE,
        question,
        f"The task asks for {what}; read a and b, print {OPERATIONS[operation]}.",
        f"```python\n{program(operation)}\n```",
        f"synthetic-{operation}-{rng.randrange(10**6):06d}",
        json.dumps(tests),
    )


FAMILIES = {GPQA: _multiple_choice, AIME: _integer, CODE: _code}


def generate_examples(n: int, seed: int, families: tuple[str, ...] = (GPQA, AIME, CODE)) -> list[Example]:
    """``n`` examples of the given families, identical for the same seed on every machine."""
    rng = random.Random(seed)
    return [FAMILIES[rng.choice(families)](rng) for _ in range(n)]


def format_prompt(question: str, effort: str = "high") -> str:
    """The prompt as gpt-oss's files render it with harmony: a system message asking for the
    reasoning ``effort``, the user's question, then the assistant's turn opened for the model."""
    return harmony.render_prompt_text(question, effort)


#: The efforts training prompts alternate between: the round's files ask for low
#: (performance, TEST09) and high (accuracy, TEST07), and the stand-in answers both alike.
TRAINING_EFFORTS = ("low", "high")


def training_effort(index: int) -> str:
    return TRAINING_EFFORTS[index % len(TRAINING_EFFORTS)]


def corpus_texts(examples: list[Example]) -> list[str]:
    """Texts a tokenizer is trained on: every prompt and answer."""
    return [format_prompt(e.question, training_effort(i)) + e.answer_text + RETURN for i, e in enumerate(examples)]
