"""The SLURM tests' bodies, started together once the one-node test cluster is up.

Those tests spend nearly all their time waiting: on a job that sleeps past its time limit, on
vLLM servers starting inside an allocation, on the executor plugin's status checks (which back
off by 10 s per check while none of a workflow's jobs has finished: snakemake-executor-plugin-slurm
2.8.0). One after another they took about ten minutes, mostly idle; started together they take
about as long as the longest of them (bench/README.md, "SLURM test files (issue 34)").

A test marked ``@pytest.mark.slurm_concurrent(body=fn, expected_s=n)`` calls
``slurm_concurrent.result()`` (tests/conftest.py): the body ``fn`` was started in a thread when
the first such test of the session began (the bodies of every selected test at once, the longest
by ``expected_s`` first; those marked ``cpu_heavy=True`` one per host core at a time), and
``result()`` waits for it and
raises what it raised, its assertions included. A body asks for what it needs by parameter name:
``slurm_cluster``, ``tmp_path`` (its own fresh folder) and ``e2e_workdir``. Each body keeps the
test's whole sequence and every assertion; only its start moved. The processes a body starts
through :func:`popen` are killed when the session ends before the body does (``-x``, Ctrl-C).
"""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: Every process group a body started through popen(), for the session's end.
_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()


def popen(cmd: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` in a new session, remembered until it has exited."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    with _children_lock:
        _children.add(proc)
    return proc


def forget(proc: subprocess.Popen) -> None:
    with _children_lock:
        _children.discard(proc)


def kill_children() -> None:
    """KILL the process group of every body process still running."""
    with _children_lock:
        live = [p for p in _children if p.poll() is None]
        _children.clear()
    for proc in live:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for proc in live:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass


@dataclass
class Body:
    name: str
    fn: Callable[..., None]
    thread: threading.Thread | None = None
    error: BaseException | None = None
    waited: float = 0.0  # for a CPU slot (cpu_heavy), in seconds
    seconds: float | None = None  # from its start to its end


@dataclass
class Bodies:
    #: How many ``cpu_heavy`` bodies run at once (the host's cores): they start vLLM servers or
    #: train and quantize a model, and one more beside them slows all, the longest included.
    heavy_slots: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(os.cpu_count() or 1))
    bodies: dict[str, Body] = field(default_factory=dict)

    def start(
        self, name: str, fn: Callable[..., None], resolve: Callable[[str], object], cpu_heavy: bool = False
    ) -> None:
        """Start ``fn`` in a thread with the arguments its parameters name (``resolve(name)``);
        an argument that cannot be made (a failed end-to-end build) is the body's error. A
        ``cpu_heavy`` body first waits for one of ``heavy_slots``."""
        body = self.bodies[name] = Body(name, fn)
        try:
            kwargs = {param: resolve(param) for param in inspect.signature(fn).parameters}
        except BaseException as err:  # pytest.fail's exception is a BaseException
            body.error = err
            return

        def run() -> None:
            asked = time.monotonic()
            if cpu_heavy:
                self.heavy_slots.acquire()
            began = time.monotonic()
            body.waited = began - asked
            try:
                fn(**kwargs)
            except BaseException as err:  # handed to the test, which raises it
                body.error = err
            finally:
                body.seconds = time.monotonic() - began
                if cpu_heavy:
                    self.heavy_slots.release()

        body.thread = threading.Thread(target=run, name=f"slurm-body:{name}", daemon=True)
        body.thread.start()

    def result(self, name: str, timeout: float) -> Body:
        """Wait for a body; raise what it raised; else the body (its times)."""
        body = self.bodies[name]
        if body.thread is not None:
            body.thread.join(timeout)
        if body.thread is not None and body.thread.is_alive():
            raise AssertionError(f"the body of {name} still runs after {timeout} s")
        if body.error is not None:
            raise body.error
        return body
