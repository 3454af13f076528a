"""The split head's pipe protocol: LoadGen's process <-> its dispatch workers.

Frames are ``kind (1 byte) | payload length (uint32 LE) | payload``. The head sends each prompt
to a worker once (``P``), then queries as (LoadGen id, prompt key) pairs (``Q``); a worker
sends back only what LoadGen needs: first tokens (``F``: id, token) and answers (``C``: id,
count, the token ids as int32). Fixed-size binary records: a query costs the head one
``struct.pack`` and its share of one ``os.write``, an answer one ``unpack_from`` and one
``array.frombytes`` (bench/README.md: split head).
"""

from __future__ import annotations

import json
import os
import struct
from array import array
from collections.abc import Iterator

HEADER = struct.Struct("<cI")
QUERY = struct.Struct("<QI")  # LoadGen query id, prompt key
FIRST = struct.Struct("<Qi")  # LoadGen query id, first token id
ANSWER = struct.Struct("<QI")  # LoadGen query id, token count (the int32 ids follow)
PROMPT_KEY = struct.Struct("<I")

# head -> worker
INIT, PROMPT, QUERIES, FINISH = b"I", b"P", b"Q", b"X"
# worker -> head
READY, FIRSTS, ANSWERS, FATAL, STATS = b"R", b"F", b"C", b"E", b"S"


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def json_frame(kind: bytes, value) -> bytes:
    return frame(kind, json.dumps(value).encode())


def prompt_frame(key: int, token_ids) -> bytes:
    return frame(PROMPT, PROMPT_KEY.pack(key) + array("i", token_ids).tobytes())


def firsts_frame(firsts: list[tuple[int, int]]) -> bytes:
    return frame(FIRSTS, b"".join([FIRST.pack(qid, token) for qid, token in firsts]))


def answers_frame(answers: list[tuple[int, list[int]]]) -> bytes:
    parts = []
    for qid, tokens in answers:
        parts.append(ANSWER.pack(qid, len(tokens)))
        parts.append(array("i", tokens).tobytes())
    return frame(ANSWERS, b"".join(parts))


def read_prompt(payload: memoryview) -> tuple[int, list[int]]:
    (key,) = PROMPT_KEY.unpack_from(payload)
    ids = array("i")
    ids.frombytes(payload[PROMPT_KEY.size :])
    return key, ids.tolist()


def read_queries(payload: memoryview) -> Iterator[tuple[int, int]]:
    return QUERY.iter_unpack(payload)


def read_firsts(payload: memoryview) -> Iterator[tuple[int, int]]:
    return FIRST.iter_unpack(payload)


def read_answers(payload: memoryview) -> Iterator[tuple[int, array]]:
    offset, end = 0, len(payload)
    while offset < end:
        qid, n = ANSWER.unpack_from(payload, offset)
        offset += ANSWER.size
        tokens = array("i")
        tokens.frombytes(payload[offset : offset + 4 * n])
        offset += 4 * n
        yield qid, tokens


class FrameReader:
    """Frames out of a byte stream read in arbitrary pieces."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes, memoryview]]:
        buffer = self._buffer
        buffer += data
        frames, offset, end = [], 0, len(buffer)
        while end - offset >= HEADER.size:
            kind, length = HEADER.unpack_from(buffer, offset)
            if end - offset - HEADER.size < length:
                break
            start = offset + HEADER.size
            frames.append((kind, bytes(buffer[start : start + length])))
            offset = start + length
        if offset:
            del buffer[:offset]
        return [(kind, memoryview(payload)) for kind, payload in frames]

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer)


def write_all(fd: int, data: bytes) -> None:
    """Every byte to a blocking pipe (a large write may be taken in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
