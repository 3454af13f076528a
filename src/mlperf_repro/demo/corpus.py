"""A synthetic dataset shaped like MLPerf's processed OpenOrca set for llama2-70b.

Each record has the same columns as ``open_orca_gpt4_tokenized_llama.sampled_24576.pkl``
(id, system_prompt, question, output, input, tok_input, tok_output, ...). Questions come
from a few task families whose answers are a deterministic function of the question
(recall a fact from a passage, change tense, classify a review, restate a list), so a small
model can learn them in a couple of minutes and its ROUGE moves far from an untrained one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# The Llama 2 chat prompt format used by MLCommons' processorca.py.
PROMPT_WITH_SYSTEM = "<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{question} [/INST]"
PROMPT_NO_SYSTEM = "<s>[INST] {question} [/INST]"

SYSTEM_PROMPTS = [
    "",
    "You are an AI assistant. You will be given a task. You must generate a detailed answer.",
    "You are a helpful assistant, who always provide explanation. Think like you are answering to a five year old.",
    "You are an AI assistant that follows instruction extremely well. Help as much as you can.",
]

ANIMALS = [
    "fox",
    "otter",
    "heron",
    "badger",
    "lynx",
    "beaver",
    "falcon",
    "rabbit",
    "turtle",
    "walrus",
    "panda",
    "camel",
    "zebra",
    "moose",
    "koala",
    "gecko",
    "salmon",
    "raven",
    "bison",
    "lemur",
]
PLACES = [
    "forest",
    "river",
    "desert",
    "valley",
    "meadow",
    "harbor",
    "canyon",
    "island",
    "village",
    "garden",
    "mountain",
    "lagoon",
    "prairie",
    "marsh",
    "orchard",
    "glacier",
    "tundra",
    "savanna",
    "cave",
    "bay",
]
FOODS = [
    "berries",
    "fish",
    "seeds",
    "insects",
    "grass",
    "roots",
    "nuts",
    "leaves",
    "honey",
    "clams",
    "bamboo",
    "mushrooms",
    "apples",
    "worms",
    "shrimp",
    "acorns",
    "plankton",
    "moss",
    "figs",
    "crabs",
]
PEOPLE = [
    "Anna",
    "Boris",
    "Chen",
    "Dalia",
    "Emil",
    "Farah",
    "Goran",
    "Hana",
    "Ivan",
    "Jorge",
    "Keiko",
    "Lena",
    "Marek",
    "Nadia",
    "Omar",
    "Petra",
    "Quinn",
    "Rosa",
    "Sami",
    "Tariq",
]
VERBS = [
    ("walks", "walked"),
    ("drives", "drove"),
    ("runs", "ran"),
    ("rides", "rode"),
    ("sails", "sailed"),
    ("travels", "traveled"),
    ("hikes", "hiked"),
    ("flies", "flew"),
    ("swims", "swam"),
    ("climbs", "climbed"),
]
ITEMS = ["phone", "camera", "jacket", "lamp", "blender", "backpack", "novel", "headset", "kettle", "bicycle"]
GOOD = ["excellent", "wonderful", "reliable", "sturdy", "delightful", "brilliant", "comfortable", "superb"]
BAD = ["terrible", "flimsy", "disappointing", "broken", "awful", "noisy", "useless", "fragile"]
COLORS = ["red", "blue", "green", "yellow", "purple", "orange", "silver", "black", "white", "brown"]


@dataclass(frozen=True)
class Example:
    system_prompt: str
    question: str
    output: str


def _fact_recall(rng: random.Random) -> tuple[str, str]:
    animal, place, food, other = rng.choice(ANIMALS), rng.choice(PLACES), rng.choice(FOODS), rng.choice(FOODS)
    asked = rng.choice(["eat", "live"])
    text = f"The {animal} lives in the {place} and eats {food}. Sometimes it also finds {other}."
    if asked == "eat":
        question = f"Read the text and answer the question.\n\nText: {text}\n\nQuestion: What does the {animal} eat?"
        answer = f"According to the text, the {animal} eats {food}. The text also says that it sometimes finds {other}."
    else:
        question = f"Read the text and answer the question.\n\nText: {text}\n\nQuestion: Where does the {animal} live?"
        answer = f"According to the text, the {animal} lives in the {place}. That is where it finds {food}."
    return question, answer


def _past_tense(rng: random.Random) -> tuple[str, str]:
    person, (present, past), place = rng.choice(PEOPLE), rng.choice(VERBS), rng.choice(PLACES)
    color = rng.choice(COLORS)
    question = (
        f"Rewrite the sentence in the past tense.\n\nSentence: {person} {present} to the {place} with a {color} bag."
    )
    answer = (
        f"Sure. In the past tense the sentence is: {person} {past} to the {place} with a {color} bag. "
        f"Only the verb changes from {present} to {past}."
    )
    return question, answer


def _review(rng: random.Random) -> tuple[str, str]:
    item = rng.choice(ITEMS)
    positive = rng.random() < 0.5
    adjective_a, adjective_b = rng.sample(GOOD if positive else BAD, 2)
    person = rng.choice(PEOPLE)
    question = (
        f"Is the following review positive or negative?\n\n"
        f"Review: {person} bought a {item}. The {item} is {adjective_a} and {adjective_b}."
    )
    label = "positive" if positive else "negative"
    answer = (
        f"The review is {label}. {person} says the {item} is {adjective_a} and {adjective_b}, which are {label} words."
    )
    return question, answer


def _list_restate(rng: random.Random) -> tuple[str, str]:
    person = rng.choice(PEOPLE)
    colors = rng.sample(COLORS, 3)
    items = rng.sample(ITEMS, 3)
    pairs = ", ".join(f"a {c} {i}" for c, i in zip(colors, items))
    question = f"{person} owns {pairs}. Which things does {person} own? Answer in one sentence."
    answer = f"{person} owns three things: {pairs}. The first one is the {colors[0]} {items[0]}."
    return question, answer


TASK_FAMILIES = (_fact_recall, _past_tense, _review, _list_restate)


def generate_examples(n: int, seed: int) -> list[Example]:
    """``n`` examples, identical for the same ``seed`` on every machine (pure ``random``)."""
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        question, answer = rng.choice(TASK_FAMILIES)(rng)
        examples.append(Example(rng.choice(SYSTEM_PROMPTS), question, answer))
    return examples


def format_prompt(system_prompt: str, question: str) -> str:
    """The Llama 2 chat formatting MLCommons applies before tokenising inputs."""
    if system_prompt:
        return PROMPT_WITH_SYSTEM.format(system=system_prompt, question=question)
    return PROMPT_NO_SYSTEM.format(question=question)


def corpus_texts(examples: list[Example]) -> list[str]:
    """Texts a tokenizer is trained on: every prompt and every answer."""
    return [format_prompt(e.system_prompt, e.question) + " " + e.output for e in examples]
