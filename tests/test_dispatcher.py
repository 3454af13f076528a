"""The multi-endpoint dispatcher against SIMULATED endpoints (separate process, real HTTP on
loopback): balancing, exactly-once answers, and every fault a server can show."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import pytest
from sim_endpoints import SimProcess, free_ports, simulated_endpoints
from simulated_endpoint import SimulatedEndpointSpec, output_token_ids

from mlperf_repro.backends import GenerationSettings, Request
from mlperf_repro.backends.dispatcher import DispatchSettings, EndpointsLost, EndpointSpec, generated_tokens
from mlperf_repro.backends.endpoints import EndpointBackend
from mlperf_repro.backends.split_head import SplitEndpointBackend

MAX_NEW = 64


def make_requests(n: int, seed: int = 0) -> list[Request]:
    rng = random.Random(seed)
    return [Request(i, [rng.randrange(1, 30000) for _ in range(rng.randrange(8, 64))]) for i in range(n)]


class Outcome:
    def __init__(self) -> None:
        self.firsts: dict[int, list[int]] = defaultdict(list)
        self.completes: dict[int, list[list[int]]] = defaultdict(list)
        self.stats: dict = {}
        self.calls: list[tuple[str, list[int]]] = []  # each report call: its kind and request ids

    def on_first_tokens(self, firsts) -> None:
        self.calls.append(("first", [i for i, _ in firsts]))
        for i, t in firsts:
            self.firsts[i].append(t)

    def on_completions(self, answers) -> None:
        self.calls.append(("complete", [i for i, _ in answers]))
        for i, t in answers:
            self.completes[i].append(t)


def drive(
    ports,
    requests,
    *,
    settings=None,
    specs=None,
    stream=True,
    interval_s=0.0,
    midway=None,
    timeout_s=60.0,
    at_once=False,
    workers=0,
) -> Outcome:
    """Issue ``requests`` from another thread (as LoadGen does) and serve until all are answered;
    ``midway(backend)`` runs half way through. ``workers``: a split head with that many dispatch
    workers (tests/test_split_head.py), else the single-process head."""
    outcome = Outcome()
    specs = specs or [EndpointSpec(f"ep{i}", "127.0.0.1", port) for i, port in enumerate(ports)]
    head = dict(
        endpoints=specs,
        dispatch=settings or DispatchSettings(model="sim", stall_timeout_s=2, probe_interval_s=0.2, down_grace_s=2),
        generation=GenerationSettings(max_new_tokens=MAX_NEW),
        stream=stream,
        on_first_tokens=outcome.on_first_tokens,
        on_completions=outcome.on_completions,
    )
    backend = SplitEndpointBackend(workers=workers, **head) if workers else EndpointBackend(**head)
    done = threading.Event()
    stop = threading.Event()

    def issue() -> None:
        if at_once:  # as LoadGen issues Offline: every query in one call
            backend.submit(list(requests))
        for k, req in enumerate([] if at_once else requests):
            if k == len(requests) // 2 and midway is not None:
                midway(backend)
            backend.submit([req])
            if interval_s:
                time.sleep(interval_s)
        deadline = time.monotonic() + timeout_s
        while len(outcome.completes) < len(requests) and not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        done.set()

    try:
        backend.start()
        issuer = threading.Thread(target=issue, daemon=True)
        issuer.start()
        backend.serve_until(done)
    finally:
        stop.set()
        outcome.stats = backend.stats
        outcome.description = backend.describe()  # what the progress watchdog says a stall waits for
        backend.stop()
    return outcome


def assert_each_answered_once_and_right(outcome: Outcome, requests, stream=True) -> None:
    assert sorted(outcome.completes) == [r.request_id for r in requests]
    for req in requests:
        (tokens,) = outcome.completes[req.request_id]  # exactly once
        assert list(tokens) == output_token_ids(list(req.prompt_token_ids), MAX_NEW, 20)
        if stream:
            assert outcome.firsts[req.request_id] == [tokens[0]]  # first token once, and consistent
    assert outcome.stats["unanswered_queries"] == 0


def sim(port, **kw) -> SimulatedEndpointSpec:
    kw.setdefault("output_tokens", 20)
    kw.setdefault("tokens_per_s", 400)
    kw.setdefault("ttft_s", 0.01)
    return SimulatedEndpointSpec(port=port, **kw)


def test_two_endpoints_answer_everything_once():
    ports = free_ports(2)
    requests = make_requests(300)
    with simulated_endpoints([sim(p) for p in ports]):
        outcome = drive(ports, requests)
    assert_each_answered_once_and_right(outcome, requests)
    eps = outcome.stats["endpoints"]
    assert eps["ep0"]["completed"] > 50 and eps["ep1"]["completed"] > 50, outcome.stats
    assert outcome.stats["resent_queries"] == 0


def test_answers_read_in_one_loop_iteration_reach_loadgen_in_one_call():
    # Each LoadGen call hands the GIL to LoadGen's issue thread and back: answers that came in
    # together (here 16 prompts of one request, all finishing at once) go out in one call,
    # every first token before its query's answer.
    ports = free_ports(1)
    requests = make_requests(64)
    with simulated_endpoints([sim(ports[0])]):
        outcome = drive(ports, requests, at_once=True)
    assert_each_answered_once_and_right(outcome, requests)
    completion_calls = [ids for kind, ids in outcome.calls if kind == "complete"]
    assert sum(map(len, completion_calls)) == 64 and max(map(len, completion_calls)) > 1
    assert len(completion_calls) < 64
    order = {(kind, i): n for n, (kind, ids) in enumerate(outcome.calls) for i in ids}
    assert all(order[("first", r.request_id)] < order[("complete", r.request_id)] for r in requests)


def test_offline_style_burst_streamed_reports_no_first_tokens():
    # offline_stream true: Offline requests stream like Server's; LoadGen gets no first tokens.
    ports = free_ports(1)
    requests = make_requests(100)
    settings = DispatchSettings(
        model="sim", stall_timeout_s=2, probe_interval_s=0.2, down_grace_s=2, offline_stream=True
    )
    with simulated_endpoints([sim(ports[0])]):
        outcome = drive(ports, requests, stream=False, settings=settings)
    assert_each_answered_once_and_right(outcome, requests, stream=False)
    assert not outcome.firsts


# Offline with whole (non-streamed) responses (engine.dispatch.offline_stream false, the default).
WHOLE = DispatchSettings(
    model="sim", stall_timeout_s=1, probe_interval_s=0.2, probe_timeout_s=1, down_grace_s=2, offline_stream=False
)


def test_offline_whole_responses_answer_everything_once():
    ports = free_ports(1)
    requests = make_requests(200)
    with simulated_endpoints([sim(ports[0])]):
        outcome = drive(ports, requests, stream=False, settings=WHOLE, at_once=True)
    assert_each_answered_once_and_right(outcome, requests, stream=False)
    assert not outcome.firsts and outcome.stats["endpoints"]["ep0"]["requests_sent"] < len(requests)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["die", "hang", "malformed", "error_500"])
def test_offline_whole_responses_lose_no_query_to_a_failing_endpoint(fault):
    ports = free_ports(2)
    requests = make_requests(300)
    bad = sim(ports[1], fault=fault, fault_after_requests=10, fault_after_s=0.3 if fault == "die" else 0.0)
    with simulated_endpoints([sim(ports[0]), bad]):
        outcome = drive(ports, requests, stream=False, settings=WHOLE, interval_s=0.004)
    assert_each_answered_once_and_right(outcome, requests, stream=False)
    stats = outcome.stats
    assert stats["resent_queries"] > 0 and stats["endpoints"]["ep1"]["down_events"] >= 1
    if fault == "hang":  # no bytes, and /metrics does not answer either
        assert any("its /metrics did not answer" in f for f in stats["endpoints"]["ep1"]["failures"]), stats


@pytest.mark.slow
def test_a_busy_endpoint_whose_whole_responses_take_longer_than_the_stall_timeout_is_not_stalled():
    # Each answer takes ~3.8 s (20 tokens at 5 tokens/s), the stall timeout is 1 s: the
    # endpoint sends nothing for seconds, but its generated-token counter keeps moving.
    ports = free_ports(1)
    requests = make_requests(8)
    with simulated_endpoints([sim(ports[0], slots=4, tokens_per_s=5)]):
        outcome = drive(ports, requests, stream=False, settings=WHOLE, at_once=True)
    assert_each_answered_once_and_right(outcome, requests, stream=False)
    assert outcome.stats["resent_queries"] == 0 and outcome.stats["endpoints"]["ep0"]["down_events"] == 0


def test_the_generated_token_counter_is_read_from_a_metrics_page():
    page = (
        b"# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
        b"# TYPE vllm:generation_tokens_total counter\n"
        b'vllm:generation_tokens_total{engine="0",model_name="m"} 1200.0\n'
        b'vllm:generation_tokens_total{engine="1",model_name="m"} 34.0\n'
        b"vllm:generation_tokens_total_created 1.7e9\n"
        b"vllm:prompt_tokens_total 99.0\n"
    )
    assert generated_tokens(page) == 1234.0
    assert generated_tokens(b"vllm:prompt_tokens_total 99.0\n") is None


@pytest.mark.slow
def test_offline_burst_is_pulled_in_proportion_to_capacity():
    """Capacities 1:3 (slots 4 vs 12), no hint, every query issued at once. The per-endpoint
    concurrency limit keeps the rest in the head's queue, so each endpoint pulls work as fast
    as it finishes it, and the measured rates show the 1:3."""
    ports = free_ports(2)
    requests = make_requests(600)
    specs = [EndpointSpec(f"ep{i}", "127.0.0.1", p, max_concurrency=16) for i, p in enumerate(ports)]
    settings = DispatchSettings(model="sim", capacity_window_s=0.25)
    with simulated_endpoints([sim(ports[0], slots=4, tokens_per_s=200), sim(ports[1], slots=12, tokens_per_s=200)]):
        outcome = drive(ports, requests, specs=specs, settings=settings)
    assert_each_answered_once_and_right(outcome, requests)
    eps = outcome.stats["endpoints"]
    assert 0.68 <= eps["ep1"]["completed"] / len(requests) <= 0.82, eps
    rates = eps["ep1"]["tokens_per_second_busy"] / eps["ep0"]["tokens_per_second_busy"]
    assert 2.4 <= rates <= 3.6, eps


@pytest.mark.slow
@pytest.mark.parametrize("policy,low,high", [("capacity", 0.68, 0.82), ("round_robin", 0.49, 0.51)])
def test_arrivals_are_split_by_capacity_not_round_robin(policy, low, high):
    """Server-style arrivals, concurrency not limiting: round robin gives the slow endpoint
    half the work; the capacity policy about a quarter (its share of the capacity)."""
    ports = free_ports(2)
    requests = make_requests(500)
    specs = [
        EndpointSpec("ep0", "127.0.0.1", ports[0], capacity=1, max_concurrency=1000),
        EndpointSpec("ep1", "127.0.0.1", ports[1], capacity=3, max_concurrency=1000),
    ]
    settings = DispatchSettings(model="sim", policy=policy, capacity_window_s=0.25)
    with simulated_endpoints([sim(ports[0], slots=4, tokens_per_s=200), sim(ports[1], slots=12, tokens_per_s=200)]):
        outcome = drive(ports, requests, specs=specs, settings=settings, interval_s=0.01)
    assert_each_answered_once_and_right(outcome, requests)
    share_fast = outcome.stats["endpoints"]["ep1"]["completed"] / len(requests)
    assert low <= share_fast <= high, outcome.stats["endpoints"]


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["die", "hang", "malformed", "close_mid_stream", "error_500"])
def test_a_failing_endpoint_loses_no_query(fault):
    ports = free_ports(2)
    requests = make_requests(300)
    bad = sim(ports[1], fault=fault, fault_after_requests=40, fault_after_s=0.5 if fault == "die" else 0.0)
    with simulated_endpoints([sim(ports[0]), bad]):
        outcome = drive(ports, requests, interval_s=0.004)
    assert_each_answered_once_and_right(outcome, requests)
    stats = outcome.stats
    assert stats["resent_queries"] > 0
    assert stats["endpoints"]["ep1"]["resent_from"] == stats["resent_queries"]
    assert stats["endpoints"]["ep1"]["down_events"] >= 1 and stats["endpoints"]["ep1"]["failures"]
    assert stats["endpoints"]["ep0"]["resent_from"] == 0


@pytest.mark.slow
def test_a_killed_endpoint_is_probed_back_in():
    ports = free_ports(2)
    requests = make_requests(400)
    steady = SimProcess([sim(ports[0])])
    flaky = SimProcess([sim(ports[1])])
    restarted = []

    def kill_and_restart(_backend) -> None:
        flaky.kill()
        time.sleep(0.5)
        restarted.append(SimProcess([sim(ports[1])]))

    try:
        outcome = drive(ports, requests, interval_s=0.01, midway=kill_and_restart)
    finally:
        for proc in [steady, flaky, *restarted]:
            proc.stop()
    assert_each_answered_once_and_right(outcome, requests)
    ep1 = outcome.stats["endpoints"]["ep1"]
    assert ep1["down_events"] == 1 and ep1["probed_back_in"] == 1
    assert ep1["completed"] > 40  # it took work again after coming back


@pytest.mark.slow
def test_when_every_endpoint_is_gone_the_run_stops_with_the_reason():
    ports = free_ports(2)
    requests = make_requests(200)
    started = time.monotonic()
    with simulated_endpoints([sim(p, fault="die", fault_after_s=0.5) for p in ports]):
        with pytest.raises(EndpointsLost) as caught:
            drive(ports, requests, interval_s=0.01)
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert "only 0 of 2 endpoints answer" in message and "ep0" in message and "ep1" in message


def test_a_refused_request_stops_the_run_at_once():
    ports = free_ports(1)
    # Request 1 is the start-up probe, 2 the first batch of queries; the rest are refused.
    with simulated_endpoints([sim(ports[0], fault="error_400", fault_after_requests=2)]):
        with pytest.raises(EndpointsLost, match="refused a request.*HTTP 400"):
            drive(ports, make_requests(50))


def test_an_endpoint_down_before_the_run_is_reported_and_left_out():
    ports = free_ports(2)  # nothing listens on ports[1]
    requests = make_requests(50)
    with simulated_endpoints([sim(ports[0])]):
        outcome = drive(ports, requests)
        assert_each_answered_once_and_right(outcome, requests)
        assert "ep1" in outcome.stats["endpoints_down_before_run"][0]
        settings = DispatchSettings(model="sim", min_healthy_endpoints=2)
        with pytest.raises(EndpointsLost, match="only 1 of 2 endpoints answer before the run"):
            drive(ports, requests, settings=settings)


def test_a_keep_alive_connection_the_server_just_dropped_is_retried_not_failed():
    """The endpoint drops requests on connections idle for over 0.2 s (its keep-alive timeout
    firing as the request arrives); the head is told to keep idle connections for 30 s, so
    after a pause it reuses dropped connections. Those queries go out again on new
    connections to the same endpoint: nothing is resent elsewhere, nothing taken out."""
    ports = free_ports(1)
    requests = make_requests(120)
    settings = DispatchSettings(
        model="sim", max_idle_connection_s=30, warm_connections=0, stall_timeout_s=5, down_grace_s=5
    )
    pause = threading.Event()

    def midway(_backend) -> None:
        time.sleep(0.5)  # every connection is now idle past the endpoint's keep-alive
        pause.set()

    with simulated_endpoints([sim(ports[0], keep_alive_s=0.2)]):
        outcome = drive(ports, requests, settings=settings, midway=midway, interval_s=0.002)
    assert pause.is_set()
    assert_each_answered_once_and_right(outcome, requests)
    ep = outcome.stats["endpoints"]["ep0"]
    assert ep["down_events"] == 0 and outcome.stats["resent_queries"] == 0, outcome.stats
    assert ep["failures"] == []


@pytest.mark.slow
def test_waiting_queries_share_a_request_and_each_is_answered_alone():
    """A burst: queries queue in the head and go out several per request (vLLM runs each
    prompt as its own sequence); every query still gets its own tokens exactly once. Issued
    one at a time with the endpoint idle, each query is its own request."""
    ports = free_ports(1)
    burst = make_requests(200)
    specs = [EndpointSpec("ep0", "127.0.0.1", ports[0], max_concurrency=64)]
    settings = DispatchSettings(model="sim", max_prompts_per_request=8)
    with simulated_endpoints([sim(ports[0])]):
        outcome = drive(ports, burst, specs=specs, settings=settings, at_once=True)
        assert_each_answered_once_and_right(outcome, burst)
        ep = outcome.stats["endpoints"]["ep0"]
        assert ep["completed"] == 200 and 200 / 8 <= ep["requests_sent"] < 100, ep
        trickle = make_requests(20, seed=1)
        outcome = drive(ports, trickle, specs=specs, settings=settings, interval_s=0.1)
        assert_each_answered_once_and_right(outcome, trickle)
        assert outcome.stats["endpoints"]["ep0"]["requests_sent"] == 20


def test_the_echoed_prompt_ids_are_cut_out_only_where_they_are_plain():
    from mlperf_repro.backends.dispatcher import _decode_chunk, _without_prompt_ids

    first = (
        b'{"id":"c","choices":[{"index":2,"text":"","finish_reason":null,"prompt_token_ids":[1,2,3],"token_ids":[9]}]}'
    )
    assert (
        _without_prompt_ids(first)
        == b'{"id":"c","choices":[{"index":2,"text":"","finish_reason":null,"token_ids":[9]}]}'
    )
    choice = _decode_chunk(_without_prompt_ids(first)).choices[0]
    assert (choice.index, choice.token_ids, choice.finish_reason) == (2, [9], None)
    for other in (
        b'{"choices":[{"prompt_token_ids":[1,2],"token_ids":[4]}]}',  # first key: no comma
        b'{"choices":[{"index":0,"prompt_token_ids": [1, 2],"token_ids":[4]}]}',  # spaces
        b'{"choices":[{"index":0,"prompt_token_ids":null,"token_ids":[4]}]}',
    ):
        assert _without_prompt_ids(other) == other
        assert _decode_chunk(other).choices[0].token_ids == [4]


def test_the_hot_path_leaves_no_reference_cycles_for_the_gc():
    """The head runs with the cyclic GC off (its pauses went straight into TTFT), so
    everything a query and a connection allocate must be freed by reference counting.
    Connections are opened and closed (idle ones retired after 50 ms, a pause halfway
    through the queries): none of their objects may be left for the GC."""
    import gc

    ports = free_ports(2)
    requests = make_requests(600)
    settings = DispatchSettings(
        model="sim", warm_connections=4, max_idle_connection_s=0.05, stall_timeout_s=5, down_grace_s=5
    )

    def pause(_backend) -> None:  # long enough for every idle connection to be retired
        time.sleep(0.3)

    gc.collect()
    flags = gc.get_debug()
    with simulated_endpoints([sim(p) for p in ports]):
        outcome = drive(ports, requests, settings=settings, interval_s=0.001, midway=pause)
    assert_each_answered_once_and_right(outcome, requests)
    opened = sum(e["connections_opened"] for e in outcome.stats["endpoints"].values())
    assert opened > 8, outcome.stats  # connections did come and go
    gc.disable()
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        # Per query and per connection; the backend's own few objects (an endpoint and
        # its pool refer to each other) are made once and collected after the run.
        per_query = {"HttpConnection", "HttpResponseParser", "TCPTransport", "_Attempt", "_Query", "SseEvents"}
        ours = [type(o).__name__ for o in gc.garbage if type(o).__name__ in per_query]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        gc.enable()
    assert ours == [], f"left for the cyclic GC: {sorted(set(ours))}"
    assert outcome.stats["gc_valve_collections"] == 0


def test_the_gc_valve_collects_only_when_tracked_objects_pile_up(monkeypatch):
    import gc

    from mlperf_repro.backends import endpoints

    backend = EndpointBackend(
        endpoints=[EndpointSpec("ep0", "127.0.0.1", 9)],
        dispatch=DispatchSettings(model="m"),
        generation=GenerationSettings(max_new_tokens=4),
        stream=False,
        on_first_tokens=None,
        on_completions=lambda answers: None,
    )
    try:
        backend._gc_valve()
        assert backend.gc_valve_collections == 0
        monkeypatch.setattr(endpoints, "GC_VALVE_OBJECTS", -1)
        backend._gc_valve()
        assert backend.gc_valve_collections == 1 and gc.get_count()[0] < 1000
        backend._valve.cancel()
    finally:
        backend.stop()


def test_a_request_on_a_connection_lost_after_it_was_picked_fails_like_a_reset():
    """The server closed the connection between the pool handing it out and the write: the
    request fails with a connection reset (which the dispatcher resends on a fresh
    connection), on the next loop turn rather than inside ``send``."""
    import asyncio

    from mlperf_repro.backends.http import BufferedResponse, HttpConnection

    async def main():
        conn = HttpConnection()
        conn.connection_lost(None)  # the parser and transport are dropped: no cycle left
        assert conn.closed and conn.transport is None
        conn.data_received(b"HTTP/1.1 200 OK\r\n")  # late bytes are ignored, not parsed
        sink = BufferedResponse()
        conn.send(b"POST / HTTP/1.1\r\n\r\n", sink)
        assert not sink.done.done()
        with pytest.raises(ConnectionResetError, match="before the request went out"):
            await asyncio.wait_for(sink.done, 1)

    asyncio.run(main())
