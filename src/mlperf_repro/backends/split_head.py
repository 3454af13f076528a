"""A split head: LoadGen's process does only LoadGen; dispatch workers do the HTTP.

One LoadGen process drives every endpoint of a system (the rules allow one LoadGen per result).
In a single-process head (:class:`~mlperf_repro.backends.endpoints.EndpointBackend`) the event
loop, the sockets and the response parsing share one core with LoadGen, 150-200 us of CPU per
query: the head, not the accelerators, would cap a rack-scale system near 5,000 queries/s.
Here LoadGen's process keeps LoadGen, the schedule and the completion calls, and hands each query
to one of N worker processes over a pipe (backends.head_wire: 12 bytes per query, the prompt
once per worker). Each worker is a whole dispatcher (backends.head_worker) over every endpoint,
with 1/N of each endpoint's slots and warm connections, so capacity-weighted balancing, endpoint
failover, the stall watchdog and the records work in each worker as in a single head.

* **Balancing across workers.** The queries of one flush go to the ready worker with the fewest
  unanswered queries, in batches of at most ``BATCH_PER_WORKER`` (equal workers: every worker
  sees every endpoint).
* **Nothing wakes per message under load.** LoadGen's issue thread, awake for each query anyway,
  reads the workers' pipes and sends the queued queries every half ``head_tick_ms``; the main
  thread is a fallback tick (serve_until). A busy worker does not wait on its pipe either
  (head_worker: it looks on a timer), so the head's writes wake nobody. A wake costs more CPU
  than all else a query costs here, and the writer pays for it.
* **Exactly once.** The head keeps its own ledger (query -> worker, first token reported): a
  first token and an answer reach LoadGen once, whatever happened behind them.
* **A worker that dies** (its pipe ends): once everything it wrote has been read, every query it
  held goes to the other ready workers (or waits for one), and a replacement is started. At most
  ``3 x workers`` replacements; beyond that the run stops with the reason.
* **Reports in lists**, as in the single head: everything read in one pass of the head's loop
  goes to LoadGen in one FirstTokenComplete and one QuerySamplesComplete.
"""

from __future__ import annotations

import gc
import json
import math
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, replace

from . import CompleteCallback, FirstTokenCallback, GenerationSettings, Request
from . import head_wire as wire
from .dispatcher import DispatchSettings, EndpointsLost, EndpointSpec
from .endpoints import raise_open_file_limit

# Auto mode: split only where it pays (bench/README.md, split head): a host with cores to spare
# for workers beside LoadGen's, and a system that can hold enough queries in flight to issue
# more than the single head serves comfortably on one core.
AUTO_MIN_CORES = 4
AUTO_MIN_SLOTS = 2048  # summed max_concurrency: ~2,000 queries/s at ~1 s per answer
AUTO_MAX_WORKERS = 8
STATS_TIMEOUT_S = 30.0
# While LoadGen's thread reads the pipes, the main thread's fallback look comes this many ticks apart.
IDLE_TICKS_WHILE_ISSUING = 4
# Queries issued within one flush go to one worker, up to this many (one write per flush, not one
# per worker; Offline's single issue of every query is dealt out in batches of this size).
BATCH_PER_WORKER = 64


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def head_workers(settings: DispatchSettings, endpoints: Sequence[EndpointSpec], cores: int | None = None) -> int:
    """How many dispatch workers the head runs; 0: a single-process head."""
    if settings.head_workers != "auto":
        return int(settings.head_workers)
    cores = usable_cores() if cores is None else cores
    slots = sum(e.max_concurrency for e in endpoints)
    if cores < AUTO_MIN_CORES or slots < AUTO_MIN_SLOTS:
        return 0
    # One core for LoadGen's process, one for the rest of the host; the others for workers.
    return max(1, min(AUTO_MAX_WORKERS, cores - 2))


def worker_share(endpoints: Sequence[EndpointSpec], settings: DispatchSettings, workers: int):
    """Each worker's endpoints and settings: 1/N of every endpoint's slots and warm connections."""
    specs = [replace(e, max_concurrency=max(1, math.ceil(e.max_concurrency / workers))) for e in endpoints]
    share = replace(settings, warm_connections=math.ceil(settings.warm_connections / workers), head_workers=0)
    return specs, share


class WorkerLost(RuntimeError):
    pass


class _Worker:
    __slots__ = (
        "index",
        "proc",
        "to_worker",
        "from_worker",
        "reader",
        "ready",
        "alive",
        "prompts",
        "sent",
        "answered",
        "stats",
        "problems",
    )

    def __init__(self, index: int, proc: subprocess.Popen, to_worker: int, from_worker: int) -> None:
        self.index = index
        self.proc = proc
        self.to_worker = to_worker
        self.from_worker = from_worker
        self.reader = wire.FrameReader()
        self.ready = False
        self.alive = True
        self.prompts: set[int] = set()  # prompt keys this worker holds
        self.sent = 0  # queries given to it (issue thread, and the main thread under the lock)
        self.answered = 0  # its answers read (main thread only)
        self.stats: dict | None = None
        self.problems: list[str] = []

    @property
    def holding(self) -> int:
        return self.sent - self.answered


class SplitEndpointBackend:
    """The endpoint backend with its dispatching in ``workers`` processes (see the module doc)."""

    def __init__(
        self,
        *,
        endpoints: Sequence[EndpointSpec],
        dispatch: DispatchSettings,
        generation: GenerationSettings,
        stream: bool,
        on_first_tokens: FirstTokenCallback | None,
        on_completions: CompleteCallback,
        workers: int,
        servers: dict | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("a split head needs at least one worker")
        if not endpoints:
            raise ValueError("no endpoints to dispatch to")
        raise_open_file_limit()
        self.endpoints = list(endpoints)
        self.settings = dispatch
        self.on_first_tokens = on_first_tokens if stream else None
        self.on_completions = on_completions
        self.servers = servers
        self.workers_wanted = workers
        specs, share = worker_share(endpoints, dispatch, workers)
        self._init = {
            "endpoints": [asdict(s) for s in specs],
            "dispatch": asdict(share),
            "generation": asdict(generation),
            "stream": stream,
            # A busy worker looks for queries this often (head_worker.poll): half the head's flush
            # interval, but no less than the event loop's timer step (uvloop's is 1 ms; shorter spins).
            "poll_s": max(0.001, dispatch.head_tick_ms / 1000 / 4),
        }
        self.workers: list[_Worker] = []
        self._lock = threading.Lock()
        # LoadGen id -> [worker or None, prompt key, first token reported]
        self.ledger: dict[int, list] = {}
        self.waiting: list[int] = []  # queries no ready worker holds
        # Queries wait here until ``flush_s`` after the last write to the workers (see serve_until).
        self._pending: dict[_Worker, tuple[list[bytes], list[bytes]]] = {}
        self._last_flush = 0.0
        self._batch_worker: _Worker | None = None  # the worker this flush's queries go to
        self.tick_s = dispatch.head_tick_ms / 1000
        # LoadGen's thread sends and reads at most this often (measured: bench/README.md, split head).
        self.flush_s = self.read_s = self.tick_s / 2
        self._last_read = 0.0
        self._read_lock = threading.Lock()  # one thread at a time reads the workers' pipes
        self.ticks = 0
        self.issued = 0  # queries LoadGen issued (the main thread reads it as a rate)
        self._spawn_due = 0  # replacements for lost workers, started by the main thread
        self._prompt_keys: dict[int, tuple] = {}  # id(prompt list) -> (list, key)
        self._prompt_bytes: list[bytes] = []  # key -> its PROMPT frame
        self._selector = selectors.DefaultSelector()
        self._fatal: BaseException | None = None
        self.restarts = 0
        self.resent_after_worker_loss = 0
        self.startup_problems: list[str] = []
        self.first_issue: float | None = None
        self.last_complete: float | None = None

    # -- workers ----------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlperf_repro.backends.head_worker", str(to_r), str(from_w)],
            pass_fds=(to_r, from_w),
            stdin=subprocess.DEVNULL,
        )
        os.close(to_r)
        os.close(from_w)
        os.set_blocking(from_r, False)  # polled from LoadGen's thread (_poll)
        worker = _Worker(len(self.workers), proc, to_w, from_r)
        self.workers.append(worker)
        wire.write_all(to_w, wire.json_frame(wire.INIT, self._init))
        self._selector.register(from_r, selectors.EVENT_READ, worker)
        return worker

    def _send(self, worker: _Worker, data: bytes) -> bool:
        """Write to a worker; False (and the worker marked not alive) when its pipe is broken.
        Its queries stay in its name until the main thread has read its last words (_lost)."""
        try:
            wire.write_all(worker.to_worker, data)
            return True
        except OSError:
            worker.alive = False
            return False

    def _choose(self) -> _Worker | None:
        best = None
        for worker in self.workers:
            if worker.ready and worker.alive and (best is None or worker.holding < best.holding):
                best = worker
        return best

    def _prompt_key(self, prompt) -> int:
        cached = self._prompt_keys.get(id(prompt))
        if cached is None or cached[0] is not prompt:
            key = len(self._prompt_bytes)
            self._prompt_bytes.append(wire.prompt_frame(key, prompt))
            cached = self._prompt_keys[id(prompt)] = (prompt, key)
        return cached[1]

    def _assign(self, queries: list[tuple[int, int]]) -> None:
        """Give (id, prompt key) pairs to ready workers (call with the lock held)."""
        pending = self._pending
        for qid, key in queries:
            worker = self._batch_worker
            if worker is None or not worker.alive or len(pending[worker][1]) >= BATCH_PER_WORKER:
                worker = self._batch_worker = self._choose()
            entry = self.ledger[qid]
            if worker is None:
                entry[0] = None
                self.waiting.append(qid)
                continue
            entry[0] = worker
            worker.sent += 1
            parts = pending.get(worker)
            if parts is None:
                parts = pending[worker] = ([], [])  # (new prompts, query records)
            if key not in worker.prompts:
                worker.prompts.add(key)
                parts[0].append(self._prompt_bytes[key])
            parts[1].append(wire.QUERY.pack(qid, key))
        if time.monotonic() - self._last_flush >= self.flush_s:
            self._flush()

    def _flush(self) -> None:
        """Send what waits for each worker, one write each (call with the lock held)."""
        if not self._pending:
            return
        self._last_flush = time.monotonic()
        self._batch_worker = None
        pending, self._pending = self._pending, {}
        for worker, (prompts, records) in pending.items():
            self._send(worker, b"".join(prompts) + wire.frame(wire.QUERIES, b"".join(records)))

    def _lost(self, worker: _Worker, reason: str) -> None:
        """A worker's pipe ended: its queries to the others, a replacement due (started by the
        main thread: starting a process would hold up LoadGen's thread, which may be the reader)."""
        if worker.proc.poll() is None:
            worker.proc.kill()
        code = worker.proc.wait()
        self._selector.unregister(worker.from_worker)  # read side: the caller holds the read lock
        os.close(worker.from_worker)
        worker.from_worker = -1
        with self._lock:  # write side: LoadGen's thread writes only under this lock
            worker.alive = False
            os.close(worker.to_worker)
            worker.to_worker = -1  # never a number a later pipe may reuse
            if self._fatal is not None:  # the run is over (a worker's own reason, read before its end)
                return
            if not worker.ready and self.restarts == 0 and self.first_issue is None:
                self._fatal = WorkerLost(f"dispatch worker {worker.index} failed to start ({reason}, exit {code})")
                return
            held = [(qid, entry[1]) for qid, entry in list(self.ledger.items()) if entry[0] is worker]
            self.resent_after_worker_loss += len(held)
            if self.restarts >= 3 * self.workers_wanted:
                self._fatal = WorkerLost(
                    f"dispatch workers died {self.restarts + 1} times (the last: worker {worker.index}, {reason}, "
                    f"exit {code}); {len(self.ledger)} queries unanswered"
                )
                return
            self.restarts += 1
            self._assign(held)
            self._spawn_due += 1

    # -- Backend interface ---------------------------------------------------------------
    def start(self) -> None:
        """Start the workers; each probes every endpoint and opens its warm connections."""
        for _ in range(self.workers_wanted):
            self._spawn()
        wait_s = max(60.0, 2 * self.settings.probe_timeout_s)
        deadline = time.monotonic() + wait_s
        while not all(w.ready for w in self.workers):
            if self._fatal is not None:
                raise self._fatal
            if time.monotonic() > deadline:
                raise WorkerLost(f"dispatch workers did not become ready within {wait_s:g} s")
            self._read(0.05)
        self.startup_problems = sorted({p for w in self.workers for p in w.problems})

    def submit(self, requests: Sequence[Request]) -> None:
        with self._lock:
            if self.first_issue is None:
                self.first_issue = time.monotonic()
            self.issued += len(requests)
            queries = []
            for qid, prompt in requests:
                key = self._prompt_key(prompt)
                self.ledger[qid] = [None, key, False]
                queries.append((qid, key))
            self._assign(queries)
        # LoadGen's thread is awake anyway: read what the workers sent (at most every ``read_s``,
        # and not while the main thread reads).
        if (
            time.monotonic() - self._last_read >= self.read_s
            and self._fatal is None
            and self._read_lock.acquire(blocking=False)
        ):
            try:
                self._last_read = time.monotonic()
                self._read(0)
            finally:
                self._read_lock.release()

    def serve_until(self, done: threading.Event) -> None:
        was_enabled = gc.isenabled()
        gc.freeze()
        gc.disable()  # as the single head: nothing here makes reference cycles
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        # Waking a sleeping thread costs a VM 17-38 us of CPU (bench/wake_cost.py), more
        # than all else a query costs here, so under load nothing here wakes per message: LoadGen's
        # issue thread, awake for each query anyway, reads the workers' pipes and sends the queries
        # of the last ``flush_s`` together; this thread only ticks (``head_tick_ms``) for what comes
        # while LoadGen issues nothing. An idle head waits on the pipes themselves. A query and its
        # first token each wait at most a tick, half of one while LoadGen issues.
        busy = False
        seen, seen_at = self.issued, time.monotonic()
        try:
            while True:
                if self._fatal is not None:
                    raise self._fatal
                if done.is_set() and not self.ledger:
                    break
                if busy:
                    # While LoadGen issues at least once per read_s its thread does the reading and
                    # this one is only the fallback: a longer sleep. At lower rates, one tick.
                    now = time.monotonic()
                    issuing = (self.issued - seen) * self.read_s >= now - seen_at
                    seen, seen_at = self.issued, now
                    time.sleep(self.tick_s * (IDLE_TICKS_WHILE_ISSUING if issuing else 1))
                    self.ticks += 1
                with self._read_lock:
                    busy = self._read(0.0 if busy else self.tick_s) or bool(self._pending)
                    if self._spawn_due:
                        with self._lock:
                            due, self._spawn_due = self._spawn_due, 0
                        for _ in range(due):
                            self._spawn()
                with self._lock:
                    self._flush()
        finally:
            sys.setswitchinterval(switch_interval)
            gc.unfreeze()
            if was_enabled:
                gc.enable()
            self._finish()

    def _read(self, timeout: float) -> bool:
        """Read every worker's pipe that has data (waiting up to ``timeout``); True if any had.
        Call with the read lock held."""
        if not timeout:
            return self._poll()
        events = self._selector.select(timeout)
        self._take([key.data for key, _ in events])
        return bool(events)

    def _poll(self) -> bool:
        """Read every worker's pipe without waiting (non-blocking reads: no selector call)."""
        # Every pipe still open: a worker whose pipe broke under a write (alive False) still has
        # its last frames and its end to be read here, where its queries are resent (_lost).
        return self._take([w for w in self.workers if w.from_worker >= 0])

    def _take(self, workers: list[_Worker]) -> bool:
        firsts: list[tuple[int, int]] = []
        answers: list[tuple[int, object]] = []
        took = False
        for worker in workers:
            try:
                data = os.read(worker.from_worker, 1 << 20)
            except BlockingIOError:
                continue  # polled, nothing there
            except OSError:
                data = b""
            took = True
            if not data:
                self._report(firsts, answers)
                firsts, answers = [], []
                self._lost(worker, "its pipe ended")
                continue
            for kind, payload in worker.reader.feed(data):
                self._frame(worker, kind, payload, firsts, answers)
        self._report(firsts, answers)
        if self.waiting:
            with self._lock:
                if self._choose() is not None:
                    waiting, self.waiting = self.waiting, []
                    self._assign([(qid, self.ledger[qid][1]) for qid in waiting if qid in self.ledger])
        return took

    def _frame(self, worker: _Worker, kind: bytes, payload, firsts: list, answers: list) -> None:
        ledger = self.ledger
        if kind == wire.ANSWERS:
            for qid, tokens in wire.read_answers(payload):
                entry = ledger.pop(qid, None)
                if entry is not None:
                    owner = entry[0]
                    if owner is not None:
                        owner.answered += 1
                    answers.append((qid, tokens))
        elif kind == wire.FIRSTS:
            for qid, token in wire.read_firsts(payload):
                entry = ledger.get(qid)
                if entry is not None and not entry[2]:
                    entry[2] = True
                    firsts.append((qid, token))
        elif kind == wire.READY:
            info = wire_json(payload)
            with self._lock:
                worker.problems = info.get("problems") or []
                worker.ready = True
        elif kind == wire.FATAL:
            self._fatal = EndpointsLost(bytes(payload).decode("utf-8", "replace"))
        elif kind == wire.STATS:
            worker.stats = wire_json(payload)

    def _report(self, firsts: list, answers: list) -> None:
        if firsts and self.on_first_tokens is not None:
            self.on_first_tokens(firsts)
        if answers:
            self.last_complete = time.monotonic()
            self.on_completions(answers)

    def _finish(self) -> None:
        """Every worker writes its statistics and exits (killed if it does not in time; at
        once when the run failed: their queries were answered empty)."""
        live = [w for w in self.workers if w.alive and w.proc.poll() is None and self._fatal is None]
        for worker in live:
            self._send(worker, wire.frame(wire.FINISH))
        deadline = time.monotonic() + STATS_TIMEOUT_S
        while any(w.stats is None and w.alive for w in live) and time.monotonic() < deadline:
            for key, _ in self._selector.select(0.05):
                worker = key.data
                try:
                    data = os.read(worker.from_worker, 1 << 20)
                except BlockingIOError:
                    continue
                if not data:
                    worker.alive = False
                    continue
                for kind, payload in worker.reader.feed(data):
                    if kind == wire.STATS:
                        worker.stats = wire_json(payload)
        for worker in self.workers:
            if worker.proc.poll() is None:
                try:
                    worker.proc.wait(5)
                except subprocess.TimeoutExpired:
                    worker.proc.kill()
                    worker.proc.wait()

    def describe(self) -> str:
        holding = [w for w in self.workers if w.alive and w.holding]
        return (
            f"the head's {len([w for w in self.workers if w.alive])} dispatch workers "
            f"({sum(w.holding for w in holding)} queries with them) and the servers "
            + ", ".join(f"{e.name} at http://{e.host}:{e.port}" for e in self.endpoints)
        )

    def stop(self) -> None:
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.proc.kill()
                worker.proc.wait()
            for fd in (worker.to_worker, worker.from_worker):
                if fd >= 0:
                    os.close(fd)
            worker.to_worker = worker.from_worker = -1
        self._selector.close()

    @property
    def stats(self) -> dict:
        return merged_stats(self)


def wire_json(payload) -> dict:
    return json.loads(bytes(payload))


_SUMMED = (
    "completed",
    "generated_tokens",
    "resent_from",
    "held_back",
    "requests_sent",
    "connections_opened",
    "max_concurrency_at_end",
    "down_events",
    "probed_back_in",
)


def merged_stats(backend: SplitEndpointBackend) -> dict:
    """The single head's statistics, summed over the workers that reported (a worker that died
    took its counts with it: ``head.workers_lost``), plus the head's own."""
    reported = [w.stats for w in backend.workers if w.stats]
    endpoints: dict[str, dict] = {}
    for stats in reported:
        for name, e in stats["endpoints"].items():
            into = endpoints.get(name)
            if into is None:
                endpoints[name] = {**e, "failures": list(e["failures"])}
                continue
            for key in _SUMMED:
                into[key] += e[key]
            if e["tokens_per_second_busy"] is not None:
                into["tokens_per_second_busy"] = round(
                    (into["tokens_per_second_busy"] or 0) + e["tokens_per_second_busy"], 1
                )
            into["failures"] = (into["failures"] + e["failures"])[:20]
    elapsed = backend.last_complete - backend.first_issue if backend.first_issue and backend.last_complete else None
    return {
        "policy": backend.settings.policy,
        "resent_queries": sum(s["resent_queries"] for s in reported) + backend.resent_after_worker_loss,
        "unanswered_queries": len(backend.ledger),
        "seconds_first_issue_to_last_answer": round(elapsed, 3) if elapsed else None,
        "endpoints": endpoints,
        "endpoints_down_before_run": backend.startup_problems,
        "gc_valve_collections": sum(s.get("gc_valve_collections", 0) for s in reported),
        **({"servers": backend.servers} if backend.servers else {}),
        "head": {
            "mode": "split",
            "workers": backend.workers_wanted,
            "tick_ms": backend.settings.head_tick_ms,
            "worker_restarts": backend.restarts,
            "ticks": backend.ticks,
            "workers_lost": len(backend.workers) - len(reported),
            "queries_resent_after_worker_loss": backend.resent_after_worker_loss,
            "per_worker": [s["worker"] for s in reported],
        },
    }
