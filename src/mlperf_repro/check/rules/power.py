"""A power result's measurements against the run they measured.

A power result's performance/ holds two LoadGen runs (``ranging``, which sets the meter's
ranges, and ``run_1``, the result) and the session of the power meter's daemon (SPEC PTD)
that watched them, in ``power/``:

- ``client.json`` and ``server.json``: the session's name and uuids, each phase's start and
  stop times (``phases``), and the sha1 of every file the session wrote (``results``);
- ``ptd_logs.txt``: the daemon's log: each phase's mark ("Go with mark '<session>_testing'"),
  its samples, and its tally ("Avg watts A, min watts m, max watts M, samples N, errors E,
  valid V");
- each run folder's ``spl.txt``: that phase's samples, one a second ("Time,<stamp>,Watts,W,
  Volts,V,Amps,A,PF,pf,Mark,<mark>", then per channel "ChN,Watts,...").

The result's power is the mean of the run_1 samples inside the run's power window (the
detail log's power_begin..power_end). So those samples must be the session's own (the
files' checksums, the mark), cover the window, add up (a multichannel total is the sum of
its channels; each channel's watts are volts x amps x power factor) and agree with the
daemon's own log and tally; and the result run may not draw much less than the ranging run
(as the official power checker requires: no more than 5% less).
"""

from __future__ import annotations

import datetime
import hashlib
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..evidence import Record, cross_checked, derived, note, record_kind
from ..files import UnreadableFile
from ..findings import Finding
from ..model import DETAIL_LOG, POWER_TIME, TreeContext, power_time, rule

CLIENT_JSON, SERVER_JSON = "power/client.json", "power/server.json"
SPL = "spl.txt"
PTD_LOG = "power/ptd_logs.txt"
# Each run folder and the name the daemon gives its phase.
PHASES = {"ranging": "ranging", "run_1": "testing"}
# The files every power session writes (relative to performance/), as the official power
# checker lists them; the two session files cannot hold their own checksums.
SESSION_FILES = (
    "power/client.log",
    "power/ptd_logs.txt",
    "power/server.log",
    *(f"{run}/{name}" for run in PHASES for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt", SPL)),
)
# The daemon samples once a second; a phase's samples start before the run's window opens
# and end after it closes (published: at most 1.03 s apart, the first 0.6 s or more before
# power_begin). A sample more than this late at either end, or a gap longer, leaves part
# of the window unmeasured.
EDGE_S = 1.5
GAP_S = 3.0
# Printed precision: the meter prints 5 significant digits, so a total over 10 kW is a
# whole watt; published channel sums differ from their total by at most 2 W in 11.9 kW.
SUM_ABS_W, SUM_REL = 0.5, 5e-4
# volts x amps x power factor of a channel, against its watts (published: within 0.07%).
VAPF_REL, VAPF_ABS_W = 0.01, 0.05
# The official power checker: the result run's mean power no more than 5% below ranging's.
TESTING_BELOW_RANGING = 0.05
# The session's clocks against the run's: the official checker also accepts an hour's
# shift (a clock changed for daylight saving during the session).
_DST_S = 3600.0
# The two hosts' clocks may differ by this much (the official power checker's tolerance).
CLOCKS_S = 0.8

record_kind(
    CLIENT_JSON, f"performance/{CLIENT_JSON}", "json", "the power session as the client (the SUT's host) wrote it"
)
record_kind(SERVER_JSON, f"performance/{SERVER_JSON}", "json", "the power session as the meter's host wrote it")
record_kind(SPL, "performance/*/spl.txt", "text", "one phase's power samples, one a second")
record_kind(PTD_LOG, f"performance/{PTD_LOG}", "text", "the power daemon's log: every phase's marks, samples and tally")


@dataclass
class Sample:
    line: int
    stamp: str  # as printed: the daemon's log names the sample by it
    time: float
    watts: float
    volts: float
    amps: float
    pf: float
    mark: str | None
    channels: list[tuple[float, float, float, float]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        # The daemon writes an unmeasured sample as -1 (or a negative reading) and leaves it
        # out of its tally.
        return self.watts > 0


def _stamp(text: Any) -> float | None:
    """A stamp as seconds (read as UTC, as the session's own times are)."""
    moment = power_time(text)
    return None if moment is None else moment.replace(tzinfo=datetime.UTC).timestamp()


def _quantities(tokens: list[str]) -> tuple[float, float, float, float]:
    """Watts, Volts, Amps, PF from "Watts,W,Volts,V,Amps,A,PF,pf" (ValueError otherwise)."""
    pairs = dict(zip(tokens[0::2], tokens[1::2]))
    return tuple(float(pairs[name]) for name in ("Watts", "Volts", "Amps", "PF"))  # type: ignore[return-value]


def parse_spl(lines) -> tuple[list[Sample], list[str]]:
    """The samples of an spl.txt, and what in it is not a sample the daemon writes."""
    samples, problems = [], []
    for number, line in enumerate(lines, 1):
        tokens = line.strip().split(",")
        if tokens == [""]:
            continue
        if tokens[0] != "Time" or len(tokens) < 10:
            problems.append(f"line {number} is not a sample (Time,<stamp>,Watts,...): {line.strip()[:80]!r}")
            continue
        when = _stamp(tokens[1])
        channel_at = [i for i, t in enumerate(tokens) if re.fullmatch(r"Ch\d+", t)]
        head = tokens[2 : channel_at[0] if channel_at else len(tokens)]
        mark = None
        if "Mark" in head:
            at = head.index("Mark")
            mark = head[at + 1] if at + 1 < len(head) else ""
            head = head[:at] + head[at + 2 :]
        try:
            if when is None:
                raise ValueError
            total = _quantities(head)
            channels = [
                _quantities(tokens[start + 1 : end]) for start, end in zip(channel_at, [*channel_at[1:], len(tokens)])
            ]
        except (KeyError, ValueError):
            problems.append(f"line {number} is not a sample (Time,<stamp>,Watts,...): {line.strip()[:80]!r}")
            continue
        samples.append(Sample(number, tokens[1].strip(), when, *total, mark, channels))
    for name in ("Time", "Watts", "Volts", "Amps", "PF", "Mark", "Ch*"):
        note(SPL, name)
    return samples, problems


_TALLY = re.compile(
    r"Avg watts ([-\d.]+), min watts ([-\d.]+), max watts ([-\d.]+), samples (\d+), errors (\d+), valid (\d+)"
)
_GO = re.compile(r"Go with mark '([^']*)'")
_PTD_SAMPLE = re.compile(r"^Time,([^,]+),Watts,([-\d.]+)", re.MULTILINE)


def parse_ptd_log(text: str) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Each mark's tally (the first one logged after its "Go"), and each stamped sample's watts."""
    tallies: dict[str, dict[str, float]] = {}
    events = sorted(
        [(m.start(), "go", m) for m in _GO.finditer(text)] + [(m.start(), "tally", m) for m in _TALLY.finditer(text)],
        key=lambda event: event[0],
    )
    current = None
    for _, kind, match in events:
        if kind == "go":
            current = match.group(1)
        elif current is not None and current not in tallies:
            avg, low, high, count, errors, valid = match.groups()
            try:
                tallies[current] = {
                    "avg": float(avg),
                    "min": float(low),
                    "max": float(high),
                    "samples": int(count),
                    "errors": int(errors),
                    "valid": int(valid),
                }
            except ValueError:
                continue  # not a tally the daemon prints: the phase is then reported as untallied
            current = None
    watts = {}
    for match in _PTD_SAMPLE.finditer(text):
        try:
            watts.setdefault(match.group(1).strip(), float(match.group(2)))
        except ValueError:
            continue
    for name in ("Go with mark", "Avg watts", "min watts", "max watts", "samples", "errors", "valid", "Time"):
        note(PTD_LOG, name)
    return tallies, watts


def _session(ctx: TreeContext, path: Path, kind: str) -> tuple[Record | None, str | None]:
    if not ctx.files.is_file(path):
        return None, "is missing"
    try:
        data = ctx.read_json(path)
    except (ValueError, UnreadableFile) as exc:
        return None, f"is not readable JSON ({exc})"
    if not isinstance(data, dict):
        return None, "is not a JSON object"
    return Record(kind, data), None


def _phase_bounds(session: Record, phase: str) -> tuple[float, float] | None:
    """The start and stop of a phase's measurement (the daemon's phases[1] and phases[2])."""
    try:
        marks = session["phases"][phase]
        return float(marks[1][0]), float(marks[2][0])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _phase_drift(client: Record, server: Record, phase: str) -> float | None:
    """The largest difference between the two hosts' times of a phase's marks (None if unreadable)."""
    try:
        pairs = list(zip(client["phases"][phase], server["phases"][phase], strict=True))
        return max(abs(float(a[0]) - float(b[0])) for a, b in pairs)
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _within(moment: float, bounds: tuple[float, float]) -> bool:
    return any(bounds[0] < moment - shift < bounds[1] for shift in (0.0, _DST_S))


def _checksums(ctx: TreeContext, perf: Path, client: Record, server: Record) -> list[str]:
    problems = []
    listed: dict[str, dict[str, str]] = {}
    for name, session in (("client.json", client), ("server.json", server)):
        results = session.get("results")
        if not isinstance(results, dict):
            problems.append(f"power/{name} has no 'results' (the sha1 of each file the session wrote)")
            continue
        listed[name] = {str(k): str(v) for k, v in results.items()}
    if len(listed) < 2:
        return problems
    for path in sorted(set(listed["client.json"]) & set(listed["server.json"])):
        if listed["client.json"][path] != listed["server.json"][path]:
            problems.append(f"power/client.json and power/server.json give {path} different checksums")
    recorded = {**listed["client.json"], **listed["server.json"]}
    for path in SESSION_FILES:
        here = perf / path
        if not ctx.files.is_file(here):
            problems.append(f"{path} is missing: every power session keeps it")
        elif path not in recorded:
            problems.append(f"{path} has no checksum in power/client.json or power/server.json")
        else:
            try:
                digest = hashlib.sha1(ctx.files.read_bytes(here)).hexdigest()
            except UnreadableFile as exc:
                problems.append(str(exc))
                continue
            if digest != recorded[path]:
                problems.append(
                    f"{path} has sha1 {digest[:12]}..., but the power session recorded {recorded[path][:12]}...: "
                    "the file was changed after the session wrote it"
                )
    return problems


_PROTOCOL = re.compile(r"mlcommons/power (client|server) v(\d+)$")


def _conversation_problems(client: Record, server: Record) -> list[str]:
    """The two hosts' records of one session's conversation: the same commands in the same
    order, the same replies (but to "time", which each host answers from its own clock), one
    protocol version, the same sources of the power client and server, debug off."""
    problems = []
    sent, received = client.get("messages"), server.get("messages")
    if not (isinstance(sent, list) and isinstance(received, list)):
        return ["power/client.json or power/server.json has no messages (the session's commands and replies)"]
    if len(sent) != len(received):
        problems.append(f"power/client.json records {len(sent)} commands, power/server.json {len(received)}")
    for number, (mine, theirs) in enumerate(zip(sent, received), 1):
        if not (isinstance(mine, dict) and isinstance(theirs, dict)):
            problems.append(f"message {number} is not a command and its reply")
            break
        if mine.get("cmd") != theirs.get("cmd") or (
            mine.get("cmd") != "time" and mine.get("reply") != theirs.get("reply")
        ):
            problems.append(
                f"message {number} differs between the hosts: {str(mine.get('cmd'))[:40]!r} -> "
                f"{str(mine.get('reply'))[:40]!r} against {str(theirs.get('cmd'))[:40]!r} -> "
                f"{str(theirs.get('reply'))[:40]!r}"
            )
            break
    if received and isinstance(received[0], dict):
        versions = {
            m.group(1): m.group(2)
            for text in (received[0].get("cmd"), received[0].get("reply"))
            if isinstance(text, str) and (m := _PROTOCOL.search(text))
        }
        if len(set(versions.values())) > 1:
            problems.append(f"the power client speaks protocol v{versions['client']}, the server v{versions['server']}")
    mine, theirs = client.get("sources"), server.get("sources")
    if not (isinstance(mine, dict) and isinstance(theirs, dict)):
        problems.append("power/client.json or power/server.json has no sources (the power code's file hashes)")
    else:
        differ = sorted(name for name in mine.keys() & theirs.keys() if mine[name] != theirs[name])
        if differ:
            problems.append(
                f"the power client's and server's {', '.join(differ[:3])} hash differently: "
                "one of the two ran changed power-measurement code"
            )
    if server.get("debug", False) not in (False, None):
        problems.append("the power server ran in debug mode (the official power checker refuses it)")
    return problems


def _samples_problems(samples: list[Sample], mark: str, begin: float, end: float) -> list[str]:
    problems = []
    foreign = sorted({s.mark for s in samples if s.mark != mark}, key=str)
    if foreign:
        problems.append(f"samples marked {foreign[0]!r}, not this phase's {mark!r}: they are another session's")
    valid = [s for s in samples if s.valid]
    if not valid:
        return [*problems, "no measured sample: the run's power is unknown"]
    for earlier, later in zip(samples, samples[1:]):
        if later.time < earlier.time:
            problems.append(f"line {later.line}'s sample is older than line {earlier.line}'s")
            break
    if valid[0].time > begin + EDGE_S or valid[-1].time < end - EDGE_S:
        problems.append(
            f"the measured samples run from {_shown(valid[0].time)} to {_shown(valid[-1].time)}, "
            f"but the run's power window is {_shown(begin)} to {_shown(end)}: part of the run was not measured"
        )
    # (a sample the meter could not measure is still written: a gap is a sample missing)
    inside = [s for s in samples if begin - GAP_S <= s.time <= end + GAP_S]
    for earlier, later in zip(inside, inside[1:]):
        if later.time - earlier.time > GAP_S:
            problems.append(
                f"no sample between lines {earlier.line} and {later.line} "
                f"({later.time - earlier.time:.1f} s, the daemon samples once a second) inside the run's window"
            )
            break
    unbalanced = next((problem for s in valid if (problem := _balance_problem(s))), None)
    if unbalanced:
        problems.append(unbalanced)
    return problems


def _balance_problem(s: Sample) -> str | None:
    """A sample's total against its channels, and each channel (or a single-channel meter's
    total) against its volts x amps x power factor."""
    if s.channels:
        total = sum(c[0] for c in s.channels)
        if abs(total - s.watts) > max(SUM_ABS_W, SUM_REL * s.watts):
            return f"line {s.line}: the channels' watts add up to {total:.1f}, not the total {s.watts:.1f}"
    for watts, volts, amps, pf in s.channels or [(s.watts, s.volts, s.amps, s.pf)]:
        if watts > 0 and abs(volts * amps * pf - watts) > max(VAPF_ABS_W, VAPF_REL * watts):
            return (
                f"line {s.line}: {watts} W is not volts x amps x power factor "
                f"({volts} x {amps} x {pf} = {volts * amps * pf:.1f} W)"
            )
    return None


def _shown(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime(POWER_TIME)[:-3]


def _window(detail: dict[str, Any]) -> tuple[float, float] | None:
    begin, end = _stamp(detail.get("power_begin")), _stamp(detail.get("power_end"))
    return None if begin is None or end is None else (begin, end)


def _close(value: float, logged: float) -> bool:
    return abs(value - logged) <= 1e-6 * max(1.0, abs(logged))


def _ptd_problems(
    tally: dict[str, float] | None, ptd_watts: dict[str, float], samples: list[Sample], mark: str
) -> list[str]:
    problems = []
    for sample in samples:
        logged = ptd_watts.get(sample.stamp)
        if logged is not None and not _close(sample.watts, logged):
            problems.append(
                f"line {sample.line}'s sample at {sample.stamp} is {sample.watts} W, "
                f"but the daemon's log (power/ptd_logs.txt) has {logged} W"
            )
            break
    if tally is None:
        problems.append(f"power/ptd_logs.txt has no tally of this phase (marked {mark!r}) to hold the samples to")
        return problems
    valid = [s.watts for s in samples if s.valid]
    if tally["samples"] != len(samples):
        problems.append(f"{len(samples)} samples here, but the daemon's tally counts {tally['samples']}")
    elif tally["errors"] + tally["valid"] != tally["samples"]:
        problems.append("the daemon's tally has errors + valid samples that are not its samples")
    elif tally["valid"] == len(valid) and valid:
        mean = statistics.fmean(valid)
        if abs(mean - tally["avg"]) > 1e-4 * max(1.0, abs(tally["avg"])):
            problems.append(f"the measured samples average {mean:.6f} W, but the daemon's tally says {tally['avg']} W")
        elif not (_close(min(valid), tally["min"]) and _close(max(valid), tally["max"])):
            problems.append(
                f"the measured samples range from {min(valid)} to {max(valid)} W, "
                f"but the daemon's tally says {tally['min']} to {tally['max']} W"
            )
    return problems


@rule(
    "power-evidence",
    evidence=[
        cross_checked(
            CLIENT_JSON,
            "results",
            "the sha1 of each session file as found (spl.txt, the run logs, the daemon's logs), and server.json's",
        ),
        cross_checked(CLIENT_JSON, "session_name", "server.json's; each spl.txt sample's mark"),
        cross_checked(CLIENT_JSON, "uuid", "server.json's"),
        cross_checked(CLIENT_JSON, "messages", "server.json's: the same commands, the same replies (not to 'time')"),
        cross_checked(CLIENT_JSON, "sources", "server.json's: one release of the power-measurement code"),
        cross_checked(SERVER_JSON, "messages", "client.json's; the first names one protocol version for both hosts"),
        cross_checked(SERVER_JSON, "sources", "client.json's"),
        cross_checked(SERVER_JSON, "debug", "off, as the official power checker requires"),
        cross_checked(CLIENT_JSON, "phases", "each run's power window (power_begin, power_end) falls inside its phase"),
        cross_checked(SERVER_JSON, "results", "the sha1 of each session file as found, and client.json's"),
        cross_checked(SERVER_JSON, "session_name", "client.json's"),
        cross_checked(SERVER_JSON, "uuid", "client.json's"),
        cross_checked(SERVER_JSON, "phases", "each run's power window falls inside its phase"),
        cross_checked(SPL, "Time", "the run's power window: the samples cover it, one a second"),
        derived(SPL, "Watts", "the sum of its channels' watts; each channel's volts x amps x power factor"),
        cross_checked(SPL, "Volts", "with Amps and PF, the watts (see Watts)"),
        cross_checked(SPL, "Amps", "with Volts and PF, the watts (see Watts)"),
        cross_checked(SPL, "PF", "with Volts and Amps, the watts (see Watts)"),
        cross_checked(SPL, "Ch*", "the total (see Watts)"),
        cross_checked(SPL, "Mark", "the session's name and the folder's phase (<session>_ranging, <session>_testing)"),
        cross_checked(PTD_LOG, "Time", "the same sample in spl.txt"),
        cross_checked(PTD_LOG, "Go with mark", "the session's phases; finds each phase's tally"),
        derived(PTD_LOG, "Avg watts", "the mean of the phase's measured samples in spl.txt"),
        derived(PTD_LOG, "min watts", "the phase's samples in spl.txt"),
        derived(PTD_LOG, "max watts", "the phase's samples in spl.txt"),
        derived(PTD_LOG, "samples", "the phase's samples in spl.txt"),
        cross_checked(PTD_LOG, "errors", "samples - valid"),
        cross_checked(PTD_LOG, "valid", "the phase's measured (positive) samples in spl.txt"),
        cross_checked(
            DETAIL_LOG,
            "power_begin",
            "a power result's samples (spl.txt) and the power session's phases: the window is measured",
        ),
    ],
)
def check_power(ctx: TreeContext) -> list[Finding]:
    """Each power result's session: its files as written, its samples covering the run and
    adding up, the daemon's log and tally agreeing with them, and the result run drawing no
    less than 5% below the ranging run."""
    findings = []
    for result in ctx.results:
        perf = result.path / "performance"
        if not ctx.files.is_dir(perf / "power"):
            continue
        where = ctx.rel(perf / "power")

        def report(message: str, path: str = where) -> None:
            findings.append(Finding("power-evidence", path, message))

        client, client_problem = _session(ctx, perf / CLIENT_JSON, CLIENT_JSON)
        server, server_problem = _session(ctx, perf / SERVER_JSON, SERVER_JSON)
        for name, problem in (("client.json", client_problem), ("server.json", server_problem)):
            if problem:
                report(f"a power result's session file power/{name} {problem}: the power measurement cannot be checked")
        if client is None or server is None:
            continue
        for message in _checksums(ctx, perf, client, server):
            report(message)
        session_name = client.get("session_name")
        if session_name != server.get("session_name"):
            report(
                f"power/client.json names session {session_name!r}, power/server.json {server.get('session_name')!r}"
            )
        if client.get("uuid") != server.get("uuid"):
            report("power/client.json and power/server.json give the session different uuids")
        for message in _conversation_problems(client, server):
            report(message)
        ptd_tallies: dict[str, dict[str, float]] = {}
        ptd_watts: dict[str, float] = {}
        if ctx.files.is_file(perf / PTD_LOG):
            try:
                ptd_tallies, ptd_watts = parse_ptd_log(ctx.files.read_text(perf / PTD_LOG))
            except UnreadableFile as exc:
                report(str(exc))
        means: dict[str, float] = {}
        for run, phase in PHASES.items():
            folder = perf / run
            log_path = folder / DETAIL_LOG
            spl_path = folder / SPL
            if not (ctx.files.is_file(log_path) and ctx.files.is_file(spl_path)):
                continue  # a missing session file is reported with the checksums
            window = _window(ctx.detail_at(log_path))
            if window is None:
                report(
                    f"{run}'s detail log has no readable power window (power_begin, power_end) for its samples",
                    ctx.rel(log_path),
                )
                continue
            # The client runs on the SUT's host, on LoadGen's clock; the meter's host keeps
            # its own, within the daemon's tolerance of it.
            bounds = _phase_bounds(client, phase)
            if bounds is None:
                report(f"power/client.json has no {phase} phase (phases.{phase}: start and stop times)")
            elif not (_within(window[0], bounds) and _within(window[1], bounds)):
                report(
                    f"{run}'s power window {_shown(window[0])} to {_shown(window[1])} is not inside "
                    f"power/client.json's {phase} phase ({_shown(bounds[0])} to {_shown(bounds[1])}): "
                    "the session did not measure this run",
                    ctx.rel(log_path),
                )
            if _phase_bounds(server, phase) is None:
                report(f"power/server.json has no {phase} phase (phases.{phase}: start and stop times)")
            drift = _phase_drift(client, server, phase)
            if drift is not None and drift > CLOCKS_S:
                report(
                    f"power/client.json and power/server.json time the {phase} phase {drift:.3f} s apart "
                    f"(the daemon allows {CLOCKS_S} s): they are not one session's records"
                )
            try:
                text_lines = list(ctx.files.lines(spl_path))
            except UnreadableFile as exc:
                report(str(exc), ctx.rel(spl_path))
                continue
            samples, problems = parse_spl(text_lines)
            mark = f"{session_name}_{phase}"
            problems += _samples_problems(samples, mark, *window)
            if ptd_tallies or ptd_watts:
                problems += _ptd_problems(ptd_tallies.get(mark), ptd_watts, samples, mark)
            for problem in problems:
                report(problem, ctx.rel(spl_path))
            measured = [s.watts for s in samples if s.valid and window[0] < s.time < window[1]]
            if measured:
                means[run] = statistics.fmean(measured)
        if len(means) == 2 and means["run_1"] < (1 - TESTING_BELOW_RANGING) * means["ranging"]:
            report(
                f"run_1 drew {means['run_1']:.2f} W on average in its window, {1 - means['run_1'] / means['ranging']:.1%} "
                f"below the ranging run's {means['ranging']:.2f} W: the result run may draw at most "
                f"{TESTING_BELOW_RANGING:.0%} less than the run that set the meter's ranges"
            )
    return findings
