"""A power meter's session written beside a factory result, as SPEC PTD and the MLCommons
power client write one: a ranging run and run_1, each with the phase's samples (spl.txt),
and power/ with the daemon's log and the two hosts' session files, whose checksums are of
the files as written. Tests then change one thing."""

from __future__ import annotations

import datetime
import hashlib
import json
import shutil
import uuid
from pathlib import Path

from tree_factory import patch_detail

from mlperf_repro.loadgen_logs import read_detail

STAMP = "%m-%d-%Y %H:%M:%S.%f"
SESSION = "2026-01-05_10-00-00"
CHANNELS = 3
# The order the published sessions list their files in each host's file.
CLIENT_FILES = (
    "power/client.log",
    *(f"{r}/{n}" for r in ("ranging", "run_1") for n in ("mlperf_log_detail.txt", "mlperf_log_summary.txt")),
)
SERVER_FILES = ("power/ptd_logs.txt", "power/server.log", "ranging/spl.txt", "run_1/spl.txt")


# The start of a session's conversation, as both hosts record it, and the power code's hashes.
MESSAGES = [
    {"cmd": "mlcommons/power client v3", "reply": "mlcommons/power server v3"},
    {"cmd": "time", "reply": "1767607200.0"},
    {"cmd": f"new,,{SESSION}", "reply": f"OK {SESSION}"},
]
SOURCES = {
    "client.py": "33ca4f26368777ac06e01f9567b714a4b8063886",
    "lib/server.py": "9bc9a3b6b9b716520658ac175913bcbbdb354336",
}


def _time(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, STAMP).replace(tzinfo=datetime.UTC)


def _shown(moment: datetime.datetime) -> str:
    return moment.strftime(STAMP)[:-3]


def _window(log: Path) -> tuple[datetime.datetime, datetime.datetime]:
    detail = read_detail(log.read_text().splitlines(keepends=True))
    return _time(detail["power_begin"]), _time(detail["power_end"])


def sample_line(moment: datetime.datetime, watts_each: float, mark: str | None, *, channels: bool = True) -> str:
    """One sample: the total (the channels' sum, mean volts and amps), then each channel."""
    volts, pf = 240.0, 0.95
    amps = round(watts_each / (volts * pf), 6)
    each = round(volts * amps * pf, 1)
    fields = ["Time", _shown(moment), "Watts", f"{each * CHANNELS:.6f}", "Volts", f"{volts:.6f}"]
    fields += ["Amps", f"{amps:.6f}", "PF", f"{pf:.6f}"]
    if mark is not None:
        fields += ["Mark", mark]
    if channels:
        for number in range(1, CHANNELS + 1):
            fields += ([f"Ch{number}"] if mark is not None else []) + [
                "Watts",
                f"{each:.6f}",
                "Volts",
                f"{volts:.6f}",
                "Amps",
                f"{amps:.6f}",
                "PF",
                f"{pf:.6f}",
            ]
    return ",".join(fields)


def add_power_session(folder: Path, *, watts_each: float = 800.0, ranging_watts_each: float | None = None) -> None:
    """Make the result at ``folder`` a power result: performance/ranging (run_1's logs, an
    earlier window), each run's spl.txt, and performance/power/."""
    perf = folder / "performance"
    ranging = perf / "ranging"
    ranging.mkdir()
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt", "mlperf_log_accuracy.json"):
        shutil.copyfile(perf / "run_1" / name, ranging / name)
    begin, end = _window(perf / "run_1" / "mlperf_log_detail.txt")
    earlier = (end - begin) + datetime.timedelta(seconds=60)
    patch_detail(
        ranging / "mlperf_log_detail.txt",
        {"power_begin": _shown(begin - earlier), "power_end": _shown(end - earlier)},
    )
    power = perf / "power"
    power.mkdir()
    phases: dict[str, list[list[float]]] = {}
    ptd = ["Analyzer 1", "Selected power analyzer 'Yokogawa WT500:MULTICHANNEL'"]
    for run, phase, each in (
        ("ranging", "ranging", ranging_watts_each or watts_each),
        ("run_1", "testing", watts_each),
    ):
        start, stop = _window(perf / run / "mlperf_log_detail.txt")
        mark = f"{SESSION}_{phase}"
        go, first = start - datetime.timedelta(seconds=5), start - datetime.timedelta(seconds=3.2)
        moments = []
        moment = first
        while moment <= stop + datetime.timedelta(seconds=3):
            moments.append(moment)
            moment += datetime.timedelta(seconds=1)
        lines = [sample_line(m, each, mark) for m in moments]
        (perf / run / "spl.txt").write_text("\n".join(lines) + "\n")
        totals = [float(line.split(",")[3]) for line in lines]
        ptd.append(f"{_shown(go)}: Go with mark '{mark}'")
        ptd += [sample_line(m, each, None) for m in moments]
        done = moments[-1] + datetime.timedelta(seconds=0.5)
        ptd.append(f"{_shown(done)}: Completed test")
        ptd.append(
            f"{_shown(done)}: Avg watts {sum(totals) / len(totals):.6f}, min watts {min(totals):.6f}, "
            f"max watts {max(totals):.6f}, samples {len(totals)}, errors 0, valid {len(totals)}"
        )
        marks = [go - datetime.timedelta(seconds=10), go, stop + datetime.timedelta(seconds=2), done]
        phases[phase] = [[m.timestamp(), 1000.0 + i] for i, m in enumerate(marks)]
    (power / "ptd_logs.txt").write_text("\n".join(ptd) + "\n")
    (power / "client.log").write_text("client [INFO] Session started\n")
    (power / "server.log").write_text("ptd-server [INFO] Session started\n")
    ids = {"client": str(uuid.UUID(int=1)), "server": str(uuid.UUID(int=2))}
    write_session(perf, ids=ids, phases=phases)


def sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def write_session(perf: Path, *, ids: dict | None = None, phases: dict | None = None) -> None:
    """client.json and server.json with the checksums of the files as they are now."""
    for name, files in (("client.json", CLIENT_FILES), ("server.json", SERVER_FILES)):
        path = perf / "power" / name
        old = json.loads(path.read_text()) if path.exists() else {}
        old_phases = old.get("phases")
        drift = 0.0 if name == "client.json" else 0.05  # the meter's host keeps its own clock
        session = {
            "version": "1.0",
            "timezone": 0,
            "session_name": SESSION,
            "messages": old.get("messages") or MESSAGES,
            "sources": old.get("sources") or SOURCES,
            "uuid": ids or old["uuid"],
            "phases": {p: [[t + drift, m] for t, m in marks] for p, marks in phases.items()} if phases else old_phases,
            "results": {f: sha1(perf / f) for f in files},
        }
        path.write_text(json.dumps(session, indent=4))
