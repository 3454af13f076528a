"""Start SIMULATED endpoints (tests/simulated_endpoint.py) in a child process.

They stand in for inference servers only where the dispatcher's own behaviour is under
test (balancing, the ledger, faults); real vLLM servers are tested in test_endpoints_vllm.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from simulated_endpoint import SimulatedEndpointSpec

# Run as a script (not ``-m``): it lives with the tests, outside the installed package.
SIMULATOR = str(Path(__file__).with_name("simulated_endpoint.py"))


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()
    return ports


class SimProcess:
    def __init__(
        self, specs: list[SimulatedEndpointSpec], timestamps: str | None = None, stats: str | None = None
    ) -> None:
        self.specs = specs
        handle, self.spec_path = tempfile.mkstemp(suffix=".json")
        os.write(handle, json.dumps([asdict(s) for s in specs]).encode())
        os.close(handle)
        args = [sys.executable, SIMULATOR, self.spec_path]
        if timestamps or stats:
            args.append(timestamps or "")
        if stats:
            args.append(stats)
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "READY":
            self.proc.kill()
            raise RuntimeError(f"simulated endpoints did not start: {line!r}")

    def kill(self) -> None:
        """Like a crashed server: no chance to close anything cleanly."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        os.unlink(self.spec_path)


@contextmanager
def simulated_endpoints(specs: list[SimulatedEndpointSpec], timestamps: str | None = None):
    sim = SimProcess(specs, timestamps)
    try:
        yield sim
    finally:
        sim.stop()
