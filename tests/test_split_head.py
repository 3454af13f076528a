"""The split head (backends.split_head): LoadGen's process hands queries to dispatch worker
processes over pipes. Against SIMULATED endpoints (real HTTP on loopback, a separate process);
the workers, the pipes, LoadGen and the faults (a worker SIGKILLed, an endpoint dying) are real."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import slow_after
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_endpoints import SimProcess, free_ports, simulated_endpoints
from simulated_endpoint import SimulatedEndpointSpec, output_token_ids
from test_dispatcher import MAX_NEW, assert_each_answered_once_and_right, drive, make_requests

from mlperf_repro.backends import GenerationSettings, make_backend
from mlperf_repro.backends import head_wire as wire
from mlperf_repro.backends.dispatcher import DispatchSettings, EndpointsLost, EndpointSpec
from mlperf_repro.backends.endpoints import EndpointBackend
from mlperf_repro.backends.split_head import SplitEndpointBackend, WorkerLost, head_workers, worker_share

CHILD = Path(__file__).with_name("split_head_child.py")


# -- choosing the mode ----------------------------------------------------------------------
def _specs(n: int, slots: int) -> list[EndpointSpec]:
    return [EndpointSpec(f"ep{i}", "127.0.0.1", 9000 + i, max_concurrency=slots) for i in range(n)]


def test_auto_keeps_small_systems_and_small_hosts_in_one_process():
    auto = DispatchSettings(model="m")
    assert head_workers(auto, _specs(8, 1024), cores=16) == 8  # 16 cores: 14 to spare, at most 8
    assert head_workers(auto, _specs(8, 1024), cores=6) == 4
    assert head_workers(auto, _specs(8, 1024), cores=2) == 0  # no core to spare for a worker
    assert head_workers(auto, _specs(2, 256), cores=16) == 0  # 512 slots: a small system
    assert head_workers(DispatchSettings(model="m", head_workers=3), _specs(1, 4), cores=1) == 3
    assert head_workers(DispatchSettings(model="m", head_workers=0), _specs(8, 1024), cores=64) == 0


def test_make_backend_follows_the_config():
    engine = {
        "backend": "endpoints",
        "endpoints": {"list": [{"name": "a", "host": "127.0.0.1", "port": 1}]},
        "dispatch": {"head_workers": 2},
    }
    common = dict(
        model_path="m",
        generation=GenerationSettings(max_new_tokens=4),
        stream=True,
        on_first_tokens=None,
        on_completions=lambda _: None,
    )
    assert isinstance(make_backend(engine, **common), SplitEndpointBackend)
    engine["dispatch"] = {"head_workers": 0}
    backend = make_backend(engine, **common)
    assert isinstance(backend, EndpointBackend)
    backend.stop()


def test_each_worker_gets_its_share_of_every_endpoint():
    specs, share = worker_share(_specs(3, 10), DispatchSettings(model="m", warm_connections=9), 4)
    assert [s.max_concurrency for s in specs] == [3, 3, 3]  # ceil(10 / 4): slots are never lost
    assert share.warm_connections == 3 and share.head_workers == 0


# -- the wire ---------------------------------------------------------------------------------
token_lists = st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40), max_size=12)


@settings(max_examples=80, deadline=None)
@given(
    answers=token_lists,
    firsts=st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(-(2**31), 2**31 - 1))),
    cuts=st.lists(st.integers(0, 5000), max_size=8),
)
def test_frames_survive_any_split_of_the_stream(answers, firsts, cuts):
    """Pipes deliver bytes in pieces of any size: frames come out whole and unchanged."""
    sent = [(2**63 + i, tokens) for i, tokens in enumerate(answers)]
    stream = wire.firsts_frame(firsts) + wire.answers_frame(sent) + wire.prompt_frame(7, [1, 2, 3])
    reader, frames, start = wire.FrameReader(), [], 0
    for cut in sorted(c % (len(stream) + 1) for c in cuts) + [len(stream)]:
        frames += reader.feed(stream[start:cut])
        start = max(start, cut)
    assert [k for k, _ in frames] == [wire.FIRSTS, wire.ANSWERS, wire.PROMPT] and reader.pending_bytes == 0
    assert list(wire.read_firsts(frames[0][1])) == firsts
    assert [(q, t.tolist()) for q, t in wire.read_answers(frames[1][1])] == sent
    assert wire.read_prompt(frames[2][1]) == (7, [1, 2, 3])


# -- the head against simulated endpoints, without LoadGen -------------------------------------
def sim(port, **kw) -> SimulatedEndpointSpec:
    kw.setdefault("output_tokens", 20)
    kw.setdefault("tokens_per_s", 400)
    kw.setdefault("ttft_s", 0.01)
    return SimulatedEndpointSpec(port=port, **kw)


def drive_split(ports, requests, *, workers=2, max_concurrency=256, down_grace_s=5, capacity_window_s=1.0, **options):
    """tests/test_dispatcher.py's ``drive`` through a split head of ``workers``."""
    return drive(
        ports,
        requests,
        workers=workers,
        specs=[EndpointSpec(f"ep{i}", "127.0.0.1", p, max_concurrency=max_concurrency) for i, p in enumerate(ports)],
        settings=DispatchSettings(
            model="sim",
            stall_timeout_s=2,
            probe_interval_s=0.2,
            down_grace_s=down_grace_s,
            capacity_window_s=capacity_window_s,
        ),
        **options,
    )


def test_workers_share_the_queries_and_answer_each_once():
    ports = free_ports(2)
    requests = make_requests(400)
    with simulated_endpoints([sim(p) for p in ports]):
        outcome = drive_split(ports, requests, workers=3)
    assert_each_answered_once_and_right(outcome, requests)
    head = outcome.stats["head"]
    assert head["workers"] == 3 and head["worker_restarts"] == 0 and len(head["per_worker"]) == 3
    assert sum(w["answered"] for w in head["per_worker"]) == 400
    assert all(w["answered"] > 50 for w in head["per_worker"]), head  # least-held first: all take part
    assert sum(e["completed"] for e in outcome.stats["endpoints"].values()) == 400
    assert outcome.description.startswith("the head's 3 dispatch workers (0 queries with them)")
    assert f"ep1 at http://127.0.0.1:{ports[1]}" in outcome.description


@pytest.mark.slow
def test_an_offline_burst_is_pulled_in_proportion_to_capacity_through_the_workers():
    """As tests/test_dispatcher.py's single head: capacities 1:3 (slots 4 vs 12), every query
    issued at once, each worker holding half of each endpoint's 16 slots: the fast endpoint
    answers about three quarters, whichever worker sent the query."""
    ports = free_ports(2)
    requests = make_requests(600)
    with simulated_endpoints([sim(ports[0], slots=4, tokens_per_s=200), sim(ports[1], slots=12, tokens_per_s=200)]):
        outcome = drive_split(
            ports, requests, workers=2, max_concurrency=16, at_once=True, stream=False, capacity_window_s=0.25
        )
    assert_each_answered_once_and_right(outcome, requests, stream=False)
    eps, head = outcome.stats["endpoints"], outcome.stats["head"]
    assert 0.68 <= eps["ep1"]["completed"] / len(requests) <= 0.82, eps
    assert all(w["answered"] > 150 for w in head["per_worker"]), head  # dealt out in batches to both


def test_a_worker_killed_mid_run_loses_no_query():
    ports = free_ports(2)
    requests = make_requests(300)
    killed = []

    def kill(backend):
        killed.append(backend.workers[0].proc.pid)
        backend.workers[0].proc.kill()

    # Slow answers (0.5 s each): the killed worker holds queries in flight when it dies.
    with simulated_endpoints([sim(p, tokens_per_s=40) for p in ports]):
        outcome = drive_split(ports, requests, workers=2, midway=kill, interval_s=0.002)
    assert_each_answered_once_and_right(outcome, requests)
    head = outcome.stats["head"]
    assert killed and head["worker_restarts"] == 1 and head["workers_lost"] == 1
    assert head["queries_resent_after_worker_loss"] > 0
    assert outcome.stats["resent_queries"] >= head["queries_resent_after_worker_loss"]


def test_a_worker_that_keeps_dying_stops_the_run_with_the_reason():
    ports = free_ports(1)

    def kill_all(backend):
        def killer():
            while not done_killing.is_set():
                for worker in list(backend.workers):
                    if worker.proc.poll() is None:
                        worker.proc.kill()
                time.sleep(0.05)

        threading.Thread(target=killer, daemon=True).start()

    done_killing = threading.Event()
    with simulated_endpoints([sim(p, tokens_per_s=20) for p in ports]):
        with pytest.raises(
            WorkerLost, match=r"dispatch workers died 4 times \(the last: worker 3, its pipe ended, exit -9\)"
        ):
            drive_split(ports, make_requests(40), workers=1, midway=kill_all, interval_s=0.01)
    done_killing.set()


def test_an_endpoint_killed_mid_run_loses_no_query():
    """Each worker's dispatcher sees the endpoint go and resends what it held there."""
    ports = free_ports(2)
    requests = make_requests(300)
    steady, doomed = SimProcess([sim(ports[0])]), SimProcess([sim(ports[1], tokens_per_s=100)])
    try:
        outcome = drive_split(ports, requests, workers=2, midway=lambda _: doomed.kill(), interval_s=0.003)
    finally:
        steady.stop()
        doomed.stop()
    assert_each_answered_once_and_right(outcome, requests)
    ep1 = outcome.stats["endpoints"]["ep1"]
    assert ep1["down_events"] >= 1 and ep1["resent_from"] > 0


def test_when_every_endpoint_is_gone_the_run_stops_with_the_reason():
    """A worker's dispatcher gives up (too few endpoints for down_grace_s): its reason, naming
    the endpoints, is the run's error, not a worker restart."""
    ports = free_ports(2)
    with simulated_endpoints([sim(p, fault="die", fault_after_s=0.5) for p in ports]):
        with pytest.raises(EndpointsLost) as caught:
            drive_split(ports, make_requests(200), workers=2, interval_s=0.01, down_grace_s=1)
    message = str(caught.value)
    assert "only 0 of 2 endpoints answer" in message and "ep0" in message and "ep1" in message


def test_endpoints_down_before_the_run_are_reported_and_all_down_stops_at_start():
    ports = free_ports(2)
    requests = make_requests(60)
    with simulated_endpoints([sim(ports[0])]):  # nothing listens on ports[1]
        outcome = drive_split(ports, requests, workers=2)
        assert_each_answered_once_and_right(outcome, requests)
        (problem,) = outcome.stats["endpoints_down_before_run"]
        assert problem.startswith(f"ep1 (127.0.0.1:{ports[1]})")
    backend = SplitEndpointBackend(
        endpoints=[EndpointSpec("gone", "127.0.0.1", ports[1])],
        dispatch=DispatchSettings(model="sim", connect_timeout_s=1),
        generation=GenerationSettings(max_new_tokens=MAX_NEW),
        stream=True,
        on_first_tokens=None,
        on_completions=lambda _: None,
        workers=1,
    )
    try:
        with pytest.raises(EndpointsLost, match="only 0 of 1 endpoints answer before the run"):
            backend.start()
    finally:
        backend.stop()


# -- real LoadGen, both scenarios, both faults ---------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "fault"),
    # The everyday loop runs one; the full suite all four.
    slow_after([("Server", "worker"), ("Offline", "worker"), ("Server", "endpoint"), ("Offline", "endpoint")]),
)
def test_loadgen_run_loses_no_query_and_answers_none_twice(tmp_path, scenario, fault):
    """An accuracy run (every sample issued once, its answer logged) with dispatch worker 0
    SIGKILLed, or endpoint 1 dying, a third of the way in: every sample is answered once, with
    the right tokens, and LoadGen logs no error."""
    samples = 48
    ports = free_ports(2)
    # 20 tokens at 20 tokens/s: a second per answer, 8 slots per endpoint (4 per worker).
    specs = [sim(p, tokens_per_s=20, slots=8) for p in ports]
    if fault == "endpoint":
        specs[1] = sim(ports[1], tokens_per_s=20, slots=8, fault="die", fault_after_s=3.0)
    cfg = {
        "out": str(tmp_path / "run"),
        "scenario": scenario,
        "ports": ports,
        "workers": 2,
        "samples": samples,
        "qps": 12,
        "kill_worker_after": 16 if fault == "worker" else 0,
    }
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    with simulated_endpoints(specs):
        done = subprocess.run(
            [sys.executable, str(CHILD), str(tmp_path / "cfg.json")], capture_output=True, text=True, timeout=180
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[7:])
    record, stats = result["record"], result["record"]["backend_stats"]
    assert record["loadgen_errors"] == [] and record["completed_samples"] == samples
    assert set(Counter(result["reported"].values())) == {1}  # the head passed each answer once
    if scenario == "Server":
        assert len(result["firsts"]) == samples and set(result["firsts"].values()) == {1}
    entries = json.loads((tmp_path / "run" / "mlperf_log_accuracy.json").read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(samples))
    prompts = [[3 + i, 5 + 2 * i, 7, 11 + i % 5] for i in range(samples)]
    for entry in entries:
        data = np.frombuffer(bytes.fromhex(entry["data"]), np.int32).tolist()
        assert data == output_token_ids(prompts[entry["qsl_idx"]], 20, 20)
    if fault == "worker":
        assert result["killed"] and stats["head"]["worker_restarts"] == 1
        assert stats["head"]["queries_resent_after_worker_loss"] > 0
    else:
        assert stats["endpoints"]["ep1"]["down_events"] >= 1 and stats["resent_queries"] > 0
