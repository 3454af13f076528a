"""Progress of long steps, and a watchdog that says when one stops making any.

A :class:`Progress` reporter follows one step (a LoadGen run, a download, a quantization, an
accuracy evaluation). It writes to the job's stream (``sys.stderr``, which the workflow's
scripts point at the job's log):

- on a terminal, a live line (tqdm);
- anywhere else (a log file, a scheduler job's output), a plain line every ``interval_s``
  seconds, starting with :data:`PROGRESS_PREFIX`: done of total, the current rate, the ETA,
  the elapsed time and the step's own details (tokens/s, elapsed against min_duration);
- in both, when nothing moved for ``stall_after_s`` seconds, a line starting with
  :data:`STALL_PREFIX` that says for how long and what the step waits for (the engine, a
  server, a LoadGen callback), repeated every ``stall_after_s`` while it lasts, and one when
  progress resumes. Stall lines also go to the terminal the workflow was started from
  (:func:`configure`'s ``terminal``), so a stalled job is seen without opening its log.

The counters are read by a watcher thread (:meth:`Progress.poll`), so the hot path only
bumps an integer (or nothing at all, when the reporter reads a counter the step keeps anyway:
``count=``). Settings come from the config's ``progress`` section, which :mod:`mlperf_repro.stage`
hands over from Snakemake's config object, not from a rule's params: a different interval is
no reason to rerun a measurement.

No ML imports; tqdm only for the live line, and a plain carriage-return line without it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

PROGRESS_PREFIX = "[progress] "
STALL_PREFIX = "[stalled] "


@dataclass(frozen=True)
class ProgressSettings:
    interval_s: float = 10.0  # plain lines: one per interval
    stall_after_s: float = 120.0  # 0: no stall watchdog


DEFAULT = ProgressSettings()
_settings = DEFAULT
_terminal: TextIO | None = None
_terminal_note = ""
_active: list[Progress] = []  # innermost last: what advance() moves


def settings_from_config(config: Mapping[str, Any] | None) -> ProgressSettings:
    """The config's ``progress`` section (schema: workflow/schemas/config.schema.yaml)."""
    section = (config or {}).get("progress") or {}
    return ProgressSettings(
        interval_s=float(section.get("interval_s", DEFAULT.interval_s)),
        stall_after_s=float(section.get("stall_after_s", DEFAULT.stall_after_s)),
    )


def configure(
    settings: ProgressSettings | None = None, *, terminal: TextIO | None = None, terminal_note: str = ""
) -> None:
    """Set this process's defaults: the settings, and the terminal that stall lines are echoed
    to (with ``terminal_note``, e.g. where the log is) when the reporter writes elsewhere."""
    global _settings, _terminal, _terminal_note
    _settings = settings or DEFAULT
    _terminal = terminal
    _terminal_note = terminal_note


def current_settings() -> ProgressSettings:
    return _settings


def advance(n: int = 1) -> None:
    """Move the innermost active reporter by ``n`` (nothing without one): for code deep in a
    step (an evaluator's loop) that the step's reporter should count."""
    if _active:
        _active[-1].advance(n)


def format_duration(seconds: float) -> str:
    seconds = int(round(max(0.0, seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _rate(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


class Progress:
    """One step's progress: ``done`` of ``total`` ``unit``.

    ``count``: a callable read at each poll instead of :meth:`advance` (a counter the step
    keeps anyway). ``rates``: name -> cumulative counter, shown as a rate over the last line's
    interval (``{"tokens/s": lambda: sut.generated_tokens}``). ``details``: elapsed seconds ->
    extra fields (``["elapsed 42s of min_duration 60s"]``). ``waiting_for``: what the step
    waits for when it stalls, a string or a callable asked at that moment. ``unit="B"`` shows
    bytes in KiB/MiB/GiB. ``clock`` and ``live`` are for tests."""

    def __init__(
        self,
        label: str,
        *,
        total: float | None = None,
        unit: str = "items",
        count: Callable[[], float] | None = None,
        rates: Mapping[str, Callable[[], float]] | None = None,
        details: Callable[[float], Iterable[str]] | None = None,
        waiting_for: str | Callable[[], str] = "the step",
        settings: ProgressSettings | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        live: bool | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self._count = count
        self._rates = dict(rates or {})
        self._details = details
        self._waiting_for = waiting_for
        self.settings = settings or _settings
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.live = _isatty(self.stream) if live is None else live
        self.phase_text: str | None = None
        self._done = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._bar: Any = None
        self.started = clock()
        self._last_line = self.started
        self._last_seen = (self._read_done(), self.phase_text)
        self._last_progress = self.started
        self._last_stall_line: float | None = None
        self._line_mark = (self.started, self._read_done(), self._read_rates())
        self._start_mark = self._line_mark
        self.lines: list[str] = []  # every plain line written (tests, the closing summary)

    # -- the step's side ---------------------------------------------------------------
    @property
    def done(self) -> float:
        return self._read_done()

    def advance(self, n: float = 1) -> None:
        with self._lock:
            self._done += n

    def update(self, done: float) -> None:
        with self._lock:
            self._done = done

    def set_total(self, total: float | None) -> None:
        self.total = total

    def phase(self, text: str | None, waiting_for: str | Callable[[], str] | None = None) -> None:
        """A new phase of the step (``"loading the model"``); it counts as progress."""
        self.phase_text = text
        if waiting_for is not None:
            self._waiting_for = waiting_for

    # -- reading ---------------------------------------------------------------------------
    def _read_done(self) -> float:
        return self._count() if self._count is not None else self._done

    def _read_rates(self) -> dict[str, float]:
        return {name: read() for name, read in self._rates.items()}

    def waiting_for(self) -> str:
        return self._waiting_for() if callable(self._waiting_for) else self._waiting_for

    def _amount(self, value: float) -> str:
        return format_bytes(value) if self.unit == "B" else f"{value:.0f}"

    def status(self, now: float) -> str:
        """``120/440 queries (27%), 3.1 queries/s, ETA 1m50s, elapsed 42s, 85.3 tokens/s``."""
        done = self._read_done()
        mark_time, mark_done, mark_rates = self._line_mark
        span = now - mark_time
        parts = []
        if self.phase_text:
            parts.append(self.phase_text)
        unit = "" if self.unit == "B" else f" {self.unit}"
        if self.total:
            share = 100.0 * done / self.total
            parts.append(f"{self._amount(done)}/{self._amount(self.total)}{unit} ({share:.0f}%)")
        else:
            parts.append(f"{self._amount(done)}{unit}")
        if span > 0:
            rate = (done - mark_done) / span
            rate_text = f"{format_bytes(rate)}/s" if self.unit == "B" else f"{_rate(rate)} {self.unit}/s"
            parts.append(rate_text)
        average = done / (now - self.started) if now > self.started else 0.0
        if self.total and done < self.total and average > 0:
            parts.append(f"ETA {format_duration((self.total - done) / average)}")
        parts.append(f"elapsed {format_duration(now - self.started)}")
        if span > 0:
            now_rates = self._read_rates()
            parts += [f"{_rate((now_rates[n] - mark_rates.get(n, 0.0)) / span)} {n}" for n in now_rates]
        if self._details is not None:
            parts += list(self._details(now - self.started))
        return ", ".join(parts)

    # -- the watcher's side ---------------------------------------------------------------
    def poll(self) -> list[str]:
        """Check the counters now: a plain line when the interval is over, a stall line when
        nothing moved for stall_after_s. Returns the lines written."""
        now = self.clock()
        written = self._observe(now)
        stall_after = self.settings.stall_after_s
        if stall_after > 0 and now - self._last_progress >= stall_after:
            if self._last_stall_line is None or now - self._last_stall_line >= stall_after:
                written.append(self._stall_line(now))
                self._last_stall_line = now
        if self.live:
            self._live_update(now)
        elif now - self._last_line >= self.settings.interval_s:
            written.append(self._write(f"{PROGRESS_PREFIX}{self.label}: {self.status(now)}"))
            self._last_line = now
            self._line_mark = (now, self._read_done(), self._read_rates())
        return written

    def _observe(self, now: float) -> list[str]:
        """Note progress since the last look; after a stall, say it resumed."""
        seen = (self._read_done(), self.phase_text)
        if seen == self._last_seen:
            return []
        written = []
        if self._last_stall_line is not None:
            without = format_duration(now - self._last_progress)
            written.append(self._write(f"{PROGRESS_PREFIX}{self.label}: resumed after {without} without progress"))
            self._last_stall_line = None
        self._last_seen = seen
        self._last_progress = now
        return written

    def _stall_line(self, now: float) -> str:
        done = self._read_done()
        where = f"{self._amount(done)}/{self._amount(self.total)}" if self.total else self._amount(done)
        unit = "" if self.unit == "B" else f" {self.unit}"
        phase = f" ({self.phase_text})" if self.phase_text else ""
        line = (
            f"{STALL_PREFIX}{self.label}: no progress for {format_duration(now - self._last_progress)}{phase} "
            f"at {where}{unit}; waiting for {self.waiting_for()}"
        )
        self._write(line)
        if _terminal is not None and _terminal is not self.stream and not self.live:
            try:
                _terminal.write(line + _terminal_note + "\n")
                _terminal.flush()
            except (OSError, ValueError):
                pass
        return line

    def _write(self, line: str) -> str:
        self.lines.append(line)
        try:
            if self._bar is not None:
                self._bar.write(line, file=self.stream)
            else:
                self.stream.write(line + "\n")
                self.stream.flush()
        except (OSError, ValueError):
            pass
        return line

    def _live_update(self, now: float) -> None:
        text = self.status(now)
        try:
            if self._bar is None:
                self._bar = _make_bar(self)
            if self._bar is not None:
                if self.total:
                    self._bar.total = self.total
                    self._bar.n = min(self._read_done(), self.total)
                self._bar.set_postfix_str(text, refresh=True)
            else:
                self.stream.write(f"\r{self.label}: {text}\x1b[K")
                self.stream.flush()
        except (OSError, ValueError):
            pass
        if now - self._last_line >= self.settings.interval_s:
            self._last_line = now
            self._line_mark = (now, self._read_done(), self._read_rates())

    # -- lifetime ---------------------------------------------------------------------------
    def start(self) -> Progress:
        """Say the step started and watch it from a daemon thread until :meth:`close`."""
        unit = "" if self.unit == "B" else f" {self.unit}"
        total = f" ({self._amount(self.total)}{unit} expected)" if self.total else ""
        if not self.live:
            self._write(f"{PROGRESS_PREFIX}{self.label}: started{total}")
        _active.append(self)
        tick = max(0.05, min(0.5 if self.live else 1.0, self.settings.interval_s / 4))
        if self.settings.stall_after_s > 0:
            tick = min(tick, max(0.05, self.settings.stall_after_s / 4))

        def watch() -> None:
            while not self._stop.wait(tick):
                self.poll()

        self._thread = threading.Thread(target=watch, name=f"progress:{self.label}", daemon=True)
        self._thread.start()
        return self

    def close(self, outcome: str = "finished") -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self in _active:
            _active.remove(self)
        now = self.clock()
        self._observe(now)
        if self._bar is not None:
            try:
                self._bar.close()
            except (OSError, ValueError):
                pass
            self._bar = None
        elif self.live:
            self.stream.write("\n")
        self._line_mark = self._start_mark  # the closing line gives the whole step's averages
        self._write(f"{PROGRESS_PREFIX}{self.label}: {outcome}: {self.status(now)}")

    def watch(self, items: Iterable[Any]) -> Iterator[Any]:
        """``items``, with this reporter started before the first and closed after the last
        (or when the loop is left early): a loop that counts with :meth:`advance` inside."""
        self.start()
        outcome = "stopped"
        try:
            yield from items
            outcome = "finished"
        finally:
            self.close(outcome)

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close("finished" if exc_type is None else f"stopped ({exc_type.__name__})")


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _make_bar(progress: Progress):
    """A tqdm line (a bar when the total is known; the status text beside it), or None."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bar_format = "{desc}: {percentage:3.0f}%|{bar}| {postfix}" if progress.total else "{desc}: {postfix}"
    return tqdm(
        total=progress.total, desc=progress.label, file=progress.stream, bar_format=bar_format, dynamic_ncols=True
    )


class EngineBar:
    """What vLLM's ``LLM.generate(use_tqdm=...)`` takes for a progress bar (a tqdm factory),
    counting into ``reporter``: ``use_tqdm=EngineBar.into(reporter)``. Only the bar of the
    finished prompts counts (vLLM also wraps the prompts it renders, an iterable, in one)."""

    def __init__(
        self, reporter: Progress, iterable: Any = None, *, total: float | None = None, desc: str = "", **_: Any
    ) -> None:
        self.reporter, self.iterable, self.n, self.postfix = reporter, iterable, 0, ""
        self.counts = desc.startswith("Processed")
        self.started = time.monotonic()
        if self.counts and total and not reporter.total:
            reporter.total = total

    @classmethod
    def into(cls, reporter: Progress) -> Callable[..., EngineBar]:
        return lambda *args, **kwargs: cls(reporter, *args, **kwargs)

    def __iter__(self):
        return iter(self.iterable if self.iterable is not None else ())

    @property
    def format_dict(self) -> dict[str, float]:
        return {"elapsed": max(time.monotonic() - self.started, 1e-9)}

    def update(self, n: float = 1) -> None:
        self.n += n
        if self.counts:
            self.reporter.advance(n)

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass
