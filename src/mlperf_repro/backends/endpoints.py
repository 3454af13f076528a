"""The endpoint backend: the SUT's queries go to inference servers over HTTP.

The dispatcher's event loop runs on the thread that calls :meth:`serve_until` (the
harness's main thread); LoadGen's issue thread hands queries over with ``submit``.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from . import CompleteCallback, FirstTokenCallback, GenerationSettings, Request
from .dispatcher import Dispatcher, DispatchSettings, EndpointSpec


def endpoint_specs(engine: dict) -> list[EndpointSpec]:
    """The config's ``engine.endpoints.list`` as dispatcher specs."""
    return [
        EndpointSpec(
            name=e["name"],
            host=e["host"],
            port=e["port"],
            accelerator=e.get("accelerator", "N/A"),
            accelerator_count=e.get("accelerator_count", 1),
            max_concurrency=e.get("max_concurrency", 256),
            capacity=e.get("capacity"),
        )
        for e in engine["endpoints"]["list"]
    ]


def dispatch_settings(engine: dict) -> DispatchSettings:
    return DispatchSettings(
        model=engine["endpoints"].get("served_model_name", "model"), **(engine.get("dispatch") or {})
    )


@contextmanager
def serving(engine: dict, model_path: str, log_dir: str | Path, screening: dict | None = None) -> Iterator[dict]:
    """Servers for the run, started by the launcher the config's ``engine.endpoints.launch``
    names (:data:`mlperf_repro.launch.LAUNCHERS`: ``external``, servers already running;
    ``local``; ``slurm``, its GPUs screened first when ``screening`` says so; ``kubernetes``).
    Yields the engine config to run with, its endpoint list naming the real hosts (and, when
    screened, ``gpu_screening``: what the screen decided; for server pods, ``servers``: the
    image and which pod ran on which node)."""
    if engine["backend"] != "endpoints":
        yield engine
        return
    from ..launch import get_launcher  # not at import time: the launchers need the config's modules

    launch = (engine.get("endpoints") or {}).get("launch", "external")
    with get_launcher(launch)(engine, model_path, log_dir, screening=screening) as run_engine:
        yield run_engine


def raise_open_file_limit() -> None:
    """One connection per query in flight: thousands at the record loads, more than the
    usual soft limit of 1024 descriptors. Take what the hard limit allows."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):
        pass  # keep the current limit; a run that needs more fails with a clear EMFILE


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed (it ships with vLLM's server stack): about 2x fewer CPU cycles per request."""
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


GC_VALVE_INTERVAL_S = 1.0
GC_VALVE_OBJECTS = 2_000_000  # tracked objects; a query in flight holds under 10 (measured at 3,600 q/s)


class EndpointBackend:
    def __init__(
        self,
        *,
        endpoints: Sequence[EndpointSpec],
        dispatch: DispatchSettings,
        generation: GenerationSettings,
        stream: bool,
        on_first_tokens: FirstTokenCallback | None,
        on_completions: CompleteCallback,
        servers: dict | None = None,
    ) -> None:
        self.servers = servers  # what launched the servers and where they ran (launch: kubernetes)
        raise_open_file_limit()  # before the dispatcher reads the limit
        self.dispatcher = Dispatcher(
            endpoints,
            dispatch,
            generation,
            stream=stream,
            on_first_tokens=on_first_tokens,
            on_completions=on_completions,
        )
        self.loop = new_event_loop()
        self.dispatcher.attach_loop(self.loop)
        self.startup_problems: list[str] = []
        self.gc_valve_collections = 0

    def describe(self) -> str:
        """What a stalled run waits for (mlperf_repro.progress): the servers holding queries."""
        endpoints = self.dispatcher.endpoints
        busy = [e for e in endpoints if e.in_flight] or endpoints
        named = ", ".join(
            f"{e.spec.name} at http://{e.spec.host}:{e.spec.port} ({len(e.in_flight)} in flight"
            f"{'' if e.healthy else ', marked down'})"
            for e in busy
        )
        return f"the server{'s' if len(busy) > 1 else ''} {named}"

    def start(self) -> None:
        """Probe every endpoint (before LoadGen's clock starts)."""
        self.startup_problems = self.loop.run_until_complete(self.dispatcher.check_endpoints())
        self.loop.run_until_complete(self.dispatcher.warm_connections())

    def submit(self, requests: Sequence[Request]) -> None:
        self.dispatcher.submit(requests)

    def serve_until(self, done: threading.Event) -> None:
        # No cyclic GC during the run: a query lives about a second, so the young objects
        # of thousands of queries in flight survive each young collection and every
        # older-generation pass walks them all, a pause of 50-120 ms at 3,600 queries/s
        # (each one straight into the TTFT of every query waiting on it). The hot path
        # makes no reference cycles (tests/test_dispatcher.py), so reference counting
        # frees everything; a safety valve collects if tracked objects pile up anyway.
        was_enabled = gc.isenabled()
        gc.freeze()
        gc.disable()
        # LoadGen's issue thread needs the GIL for every query; while this loop is busy it
        # would wait up to the switch interval (5 ms) for it, straight into TTFT.
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        self._valve = self.loop.call_later(GC_VALVE_INTERVAL_S, self._gc_valve)
        try:
            self.loop.run_until_complete(self.dispatcher.run(done))
        finally:
            self._valve.cancel()
            sys.setswitchinterval(switch_interval)
            gc.unfreeze()
            if was_enabled:
                gc.enable()

    def _gc_valve(self) -> None:
        """Collect the young generation only if far more objects are alive than queries
        in flight explain (something made cycles after all); otherwise nothing."""
        if gc.get_count()[0] > GC_VALVE_OBJECTS:
            self.gc_valve_collections += 1
            gc.collect(0)
        self._valve = self.loop.call_later(GC_VALVE_INTERVAL_S, self._gc_valve)

    def stop(self) -> None:
        self.loop.close()

    @property
    def stats(self) -> dict:
        stats = self.dispatcher.stats()
        stats["endpoints_down_before_run"] = self.startup_problems
        stats["gc_valve_collections"] = self.gc_valve_collections
        stats["head"] = {"mode": "single", "workers": 0}  # backends.split_head: the split head's
        if self.servers:
            stats["servers"] = self.servers
        return stats
