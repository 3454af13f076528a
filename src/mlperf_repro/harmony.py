"""gpt-oss's harmony prompt format: the system message that carries the reasoning effort, the
o200k vocabulary openai-harmony needs, and the check that a dataset file's prompts ask for
the effort the round prescribes.

The MLCommons gpt-oss files ship prompts as ``input_tokens`` rendered with harmony; the
reasoning effort sits in their system message (``Reasoning: low|medium|high``) and differs
per file: high for the accuracy run and TEST07, low for performance runs and TEST09 (the
reference's README; rules table ``dataset.reasoning_effort``). A performance run on the
accuracy file's prompts would measure far longer answers, so the run stage reads each
prompt's effort before LoadGen starts and refuses a file whose prompts ask for another.

openai-harmony loads the ``o200k_base`` vocabulary from ``TIKTOKEN_ENCODINGS_BASE`` (a
folder) or downloads it; here it comes only from a local file verified against the sha256
the library itself pins (:data:`VOCAB_SHA256`). :func:`vocab_from_npm_tiktoken` rebuilds that
exact file from the npm ``tiktoken`` package, for machines that reach only a package mirror.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from .errors import UserError

START, END, MESSAGE = "<|start|>", "<|end|>", "<|message|>"
EFFORTS = ("low", "medium", "high")
VOCAB_FILE = "o200k_base.tiktoken"
#: The sha256 openai-harmony checks its o200k_base vocabulary against (in its compiled library).
VOCAB_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
#: Where tests and ``harmony_vocab`` defaults look for the file when no path is configured.
VOCAB_ENV = "MLPERF_REPRO_HARMONY_VOCAB"
VOCAB_HELP = (
    "get o200k_base.tiktoken from https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken "
    "(where tiktoken and openai-harmony download it), or without internet from an npm mirror: "
    "`npm pack tiktoken@1.0.22` then `mlperf-repro harmony-vocab --from tiktoken-1.0.22.tgz -o DIR` (README, gpt-oss-120b)"
)
_EFFORT = re.compile(r"^Reasoning:\s*(\w+)\s*$", re.MULTILINE)
_SYSTEM = re.compile(re.escape(START) + r"system" + re.escape(MESSAGE) + r"(.*?)" + re.escape(END), re.DOTALL)


def system_message(effort: str) -> str:
    """The system message openai-harmony renders for gpt-oss with this reasoning effort and no
    conversation date (``SystemContent.new().with_reasoning_effort(...)``)."""
    if effort not in EFFORTS:
        raise UserError(f"reasoning effort '{effort}' is not one of {', '.join(EFFORTS)}")
    return (
        "You are ChatGPT, a large language model trained by OpenAI.\n"
        "Knowledge cutoff: 2024-06\n\n"
        f"Reasoning: {effort}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every message."
    )


def render_prompt_text(question: str, effort: str) -> str:
    """A system turn, the user's question, then the assistant's turn opened for the model: the
    text of harmony's ``render_conversation_for_completion`` (tests compare the two)."""
    return f"{START}system{MESSAGE}{system_message(effort)}{END}{START}user{MESSAGE}{question}{END}{START}assistant"


def reasoning_effort(prompt_text: str) -> str | None:
    """The effort a rendered prompt's system message asks for, or None without one."""
    system = _SYSTEM.search(prompt_text)
    found = _EFFORT.search(system.group(1)) if system else None
    return found.group(1).lower() if found else None


def check_prompt_efforts(efforts: Iterable[str | None], expected: str, file: str) -> dict[str, int]:
    """Count the prompts' efforts; every one must be ``expected``. Returns the counts."""
    counts = Counter(e or "none" for e in efforts)
    if set(counts) != {expected}:
        found = ", ".join(f"{n} ask for '{e}'" for e, n in counts.most_common())
        raise UserError(
            f"{file}: the round prescribes reasoning effort '{expected}' for the prompts of this run "
            f"(rules table dataset.reasoning_effort), but of {sum(counts.values())} prompts {found} "
            "('none': no harmony system message with a 'Reasoning:' line). Use the round's own file for "
            "this run (the MLCommons gpt-oss download: perf/ for performance runs, acc/ for accuracy)."
        )
    return dict(counts)


def prompt_efforts(prompts: list[list[int]], decode, *, head_tokens: int = 160) -> list[str | None]:
    """Each token-id prompt's reasoning effort, read from its first ``head_tokens`` tokens
    (the system message comes first) decoded with ``decode`` (a tokenizer's batch_decode
    keeping special tokens)."""
    texts = decode([list(p[:head_tokens]) for p in prompts])
    return [reasoning_effort(t) for t in texts]


# -- the real vocabulary, through openai-harmony ----------------------------------------------


def find_vocab(path: str | Path | None = None) -> Path | None:
    """The configured vocabulary file (a file, or a folder holding ``o200k_base.tiktoken``),
    else the one :data:`VOCAB_ENV` names, else None. Not verified: see :func:`verify_vocab`."""
    chosen = path or os.environ.get(VOCAB_ENV)
    if not chosen:
        return None
    chosen = Path(chosen).expanduser()
    return chosen / VOCAB_FILE if chosen.is_dir() else chosen


def verify_vocab(path: str | Path) -> Path:
    """``path`` if it is the o200k_base vocabulary openai-harmony expects, else a UserError."""
    from .hashing import sha256_file

    path = Path(path)
    if not path.is_file():
        raise UserError(f"harmony vocabulary {path} does not exist: {VOCAB_HELP}")
    if path.name != VOCAB_FILE:
        raise UserError(f"harmony vocabulary {path}: openai-harmony reads it only under the name {VOCAB_FILE}")
    digest = sha256_file(path)
    if digest != VOCAB_SHA256:
        raise UserError(
            f"harmony vocabulary {path} has sha256 {digest}, not the {VOCAB_SHA256} openai-harmony expects: "
            f"it is not o200k_base; {VOCAB_HELP}"
        )
    return path


def load_encoding(vocab: str | Path):
    """openai-harmony's gpt-oss encoding over the verified local vocabulary, never a download."""
    vocab = verify_vocab(vocab)
    try:
        import openai_harmony as harmony
    except ImportError as exc:
        raise UserError(
            "reading harmony prompts needs openai-harmony (oss-harmony, installed with vllm: ./install.sh)"
        ) from exc
    previous = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(vocab.parent.resolve())
    try:
        return harmony.load_harmony_encoding(harmony.HarmonyEncodingName.HARMONY_GPT_OSS)
    except Exception as exc:  # HarmonyError, or a Rust panic surfaced as RuntimeError
        raise UserError(f"openai-harmony could not load {vocab}: {exc}") from exc
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_ENCODINGS_BASE", None)
        else:
            os.environ["TIKTOKEN_ENCODINGS_BASE"] = previous


def render_prompt_tokens(encoding, question: str, effort: str) -> list[int]:
    """The prompt's token ids as openai-harmony renders it (system message with ``effort``,
    the user's question, the assistant's turn opened)."""
    import openai_harmony as harmony

    system = harmony.SystemContent.new().with_reasoning_effort(harmony.ReasoningEffort(effort.capitalize()))
    conversation = harmony.Conversation.from_messages(
        [
            harmony.Message.from_role_and_content(harmony.Role.SYSTEM, system),
            harmony.Message.from_role_and_content(harmony.Role.USER, question),
        ]
    )
    return list(encoding.render_conversation_for_completion(conversation, harmony.Role.ASSISTANT))


def harmony_decoder(encoding):
    """A batch decoder over openai-harmony's encoding (for :func:`prompt_efforts`)."""
    return lambda batch: [encoding.decode(list(ids)) for ids in batch]


def vocab_from_npm_tiktoken(source: str | Path, out_dir: str | Path) -> Path:
    """Rebuild ``o200k_base.tiktoken`` from the npm ``tiktoken`` package (its tarball, or its
    ``encoders/o200k_base.json``), which carries the same ranks in a compact form: lines of
    ``<prefix> <first rank> <base64 token> ...``. The result is checked against
    :data:`VOCAB_SHA256`, so only the exact file openai-harmony expects is ever written."""
    import json
    import tarfile

    source = Path(source)
    if not source.is_file():
        raise UserError(f"{source} does not exist (the npm tiktoken package: `npm pack tiktoken@1.0.22`)")
    try:
        if source.name.endswith((".tgz", ".tar.gz")):
            with tarfile.open(source) as tar:
                member = tar.extractfile("package/encoders/o200k_base.json")
                if member is None:
                    raise KeyError("package/encoders/o200k_base.json")
                data = json.load(member)
        else:
            data = json.loads(source.read_text())
        ranks = []
        for line in data["bpe_ranks"].split("\n"):
            if line:
                _, first, *tokens = line.split(" ")
                ranks.extend((int(first) + i, token) for i, token in enumerate(tokens))
    except (KeyError, ValueError, tarfile.TarError, OSError) as exc:
        raise UserError(f"{source} is not the npm tiktoken package's o200k_base encoder ({exc})") from exc
    out = Path(out_dir) / VOCAB_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    partial.write_text("".join(f"{token} {rank}\n" for rank, token in sorted(ranks)))
    try:
        verify_vocab(partial.rename(out))
    except UserError:
        out.unlink()
        raise
    return out
