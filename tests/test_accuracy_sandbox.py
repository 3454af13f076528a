"""The code-execution sandbox behind LiveCodeBench scoring, with real hostile programs: each
is contained (the evaluator survives, nothing escapes, nothing is left running) and reported
as a failed run. Every case runs in both isolation modes where this host has them: network
and mount namespaces (root) and the audit-hook fallback."""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from mlperf_repro.accuracy.sandbox import READ_ONLY_ENV, Limits, SandboxResult, namespaces_available, run_python
from mlperf_repro.errors import UserError

REPO = Path(__file__).resolve().parents[1]
MODES = ["namespace", "audit"]
SMALL = Limits(cpu_seconds=2, wall_seconds=3.0, memory_bytes=256 << 20, processes=16, output_bytes=1 << 20)


@pytest.fixture(params=MODES)
def network(request):
    if request.param == "namespace" and not namespaces_available():
        pytest.skip("no network/mount namespaces here (needs root with CAP_SYS_ADMIN)")
    return request.param


def processes_of(uid: int | None) -> list[int]:
    """Live processes owned by ``uid`` (the sandbox's own uid when the evaluator is root)."""
    if uid is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
        state = next(line for line in status.splitlines() if line.startswith("State:"))
        if int(uids[0]) == uid and "Z" not in state:
            found.append(int(entry.name))
    return found


def run(source: str, network: str, stdin: str = "", limits: Limits = SMALL) -> tuple[SandboxResult, float]:
    start = time.monotonic()
    result = run_python(source, stdin, limits, network=network)
    elapsed = time.monotonic() - start
    assert processes_of(result.uid) == [], "a sandboxed process outlived its run"
    return result, elapsed


def test_a_correct_program_reads_stdin_and_passes(network):
    source = "import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(sum(nums))\n"
    result, _ = run(source, network, stdin="1 2 3\n40\n")
    assert result.ok and result.stdout == b"46\n" and result.killed is None
    if os.geteuid() == 0:
        assert result.uid is not None and result.uid != 0


def test_a_failing_program_reports_its_exit_status_and_stderr(network):
    result, _ = run("raise SystemExit(3)", network)
    assert result.returncode == 3 and not result.ok
    result, _ = run("1/0", network)
    assert result.returncode == 1 and b"ZeroDivisionError" in result.stderr and not result.ok


def test_fork_bomb_is_contained(network):
    source = (
        "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    )
    result, elapsed = run(source, network)
    assert not result.ok
    # Bounded by the wall clock (or stopped at once where fork is refused), and no process
    # of the sandbox's uid survives (run() checks).
    assert elapsed < SMALL.wall_seconds + 3
    # The evaluator can still start processes.
    assert os.system("true") == 0


def test_unbounded_allocation_hits_the_memory_limit(network):
    source = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n"
    result, elapsed = run(source, network)
    assert not result.ok and b"MemoryError" in result.stderr
    assert elapsed < SMALL.wall_seconds


@pytest.mark.parametrize("where", ["tmp", "worktree"])
def test_writing_outside_its_directory_does_not_reach_the_host(network, where):
    target = (Path("/tmp") if where == "tmp" else REPO) / f"sandbox-escape-{uuid.uuid4().hex}"
    source = f"import os\nopen({str(target)!r}, 'w').write('escaped')\nprint('wrote', os.getcwd())\n"
    try:
        result, _ = run(source, network)
        assert not target.exists()
        if network == "namespace" and where == "tmp":
            # /tmp inside is the throwaway working directory: the write lands there and is gone.
            assert result.ok and result.stdout.startswith(b"wrote /tmp")
        else:
            # Refused (read-only host), or, for a checkout under /tmp, not there at all: inside
            # the namespaces /tmp is the throwaway directory.
            refusals = (b"PermissionError", b"OSError", b"FileNotFoundError")
            assert not result.ok and any(r in result.stderr for r in refusals)
    finally:
        target.unlink(missing_ok=True)


def test_writing_inside_its_directory_works_and_is_removed(network):
    source = "import os\nopen('out.txt', 'w').write('x' * 10)\nprint(os.getcwd())\nprint(open('out.txt').read())\n"
    result, _ = run(source, network)
    cwd, content = result.stdout.decode().splitlines()
    assert result.ok and content == "x" * 10
    if network == "audit":  # the host path of the working directory (inside namespaces it is /tmp)
        assert cwd.startswith("/tmp/mlperf-sandbox-") and not Path(cwd).exists()


def test_file_size_limit(network):
    limits = Limits(cpu_seconds=2, wall_seconds=3.0, memory_bytes=256 << 20, file_size_bytes=1 << 16)
    source = "open('big', 'wb').write(b'x' * (1 << 20))\n"
    result, _ = run(source, network, limits=limits)
    assert not result.ok


def test_no_network_connection_reaches_the_host(network):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    port = server.getsockname()[1]
    source = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
        "s.settimeout(1)\n"
        f"s.connect(('127.0.0.1', {port}))\n"
        "s.sendall(b'leak')\n"
        "print('connected')\n"
    )
    try:
        result, _ = run(source, network)
        with pytest.raises(BlockingIOError):
            server.accept()
        assert not result.ok and b"connected" not in result.stdout
        expected = b"PermissionError" if network == "audit" else b"OSError"
        assert expected in result.stderr or b"Error" in result.stderr
    finally:
        server.close()


def test_sleeping_forever_is_killed_at_the_wall_clock(network):
    limits = Limits(cpu_seconds=2, wall_seconds=1.0, memory_bytes=256 << 20)
    result, elapsed = run("import time\ntime.sleep(10**6)\n", network, limits=limits)
    assert result.timed_out and "wall-clock" in (result.killed or "") and not result.ok
    assert elapsed < 3


def test_closing_its_output_and_sleeping_is_killed_at_the_wall_clock(network):
    limits = Limits(cpu_seconds=2, wall_seconds=1.0, memory_bytes=256 << 20)
    source = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)\n"
    result, elapsed = run(source, network, limits=limits)
    assert result.timed_out and not result.ok and elapsed < 3


def test_spinning_is_stopped_by_the_cpu_limit(network):
    limits = Limits(cpu_seconds=1, wall_seconds=10.0, memory_bytes=256 << 20)
    result, elapsed = run("while True:\n    pass\n", network, limits=limits)
    assert not result.ok and not result.timed_out and "CPU" in (result.killed or "")
    assert elapsed < 5


def test_killing_its_parent_fails_and_the_evaluator_survives(network):
    source = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('sent')\n"
    result, _ = run(source, network)
    assert not result.ok and b"PermissionError" in result.stderr and b"sent" not in result.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="kill(-1) as the evaluator's own uid would hit its other processes")
def test_killing_everything_it_can_only_reaches_itself(network):
    sentinel = os.fork()
    if sentinel == 0:  # pragma: no cover - a bystander process of the evaluator's uid
        time.sleep(30)
        os._exit(0)
    try:
        result, _ = run("import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('survived')\n", network)
        assert os.waitpid(sentinel, os.WNOHANG) == (0, 0), "kill(-1) from the sandbox reached the evaluator's child"
        assert not result.ok or result.stdout == b"survived\n"
    finally:
        os.kill(sentinel, 9)
        os.waitpid(sentinel, 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a sandbox uid of its own")
def test_a_child_that_leaves_the_process_group_is_killed_too(network):
    source = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('parent done')\n"
    result, elapsed = run(source, network)  # run() checks that no process of the uid is left
    assert result.returncode == 0 and result.stdout == b"parent done\n"
    assert elapsed < SMALL.wall_seconds


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_printing_gigabytes_is_cut_at_the_cap(network, stream):
    source = f"import sys\nblock = b'x' * (1 << 20)\nwhile True:\n    sys.{stream}.buffer.write(block)\n"
    result, elapsed = run(source, network)
    captured = result.stdout if stream == "stdout" else result.stderr
    assert len(captured) == SMALL.output_bytes and not result.ok
    assert result.killed == f"{stream} over {SMALL.output_bytes} bytes"
    assert elapsed < SMALL.wall_seconds


def test_large_stdin_is_fed_while_output_is_read(network):
    data = "7\n" * 300_000
    source = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n"
    limits = Limits(cpu_seconds=5, wall_seconds=10.0, memory_bytes=256 << 20, output_bytes=1 << 21)
    result, _ = run(source, network, stdin=data, limits=limits)
    assert result.ok and result.stdout == data.encode()


def test_the_working_directory_is_deleted():
    # The program names its own directory: a glob over /tmp races with sandboxes of other test workers.
    result = run_python("import os\nprint(os.path.dirname(os.path.abspath(__file__)))", network="audit")
    workdir = Path(result.stdout.decode().strip())
    assert result.ok and workdir.name.startswith("mlperf-sandbox-") and not workdir.exists()


def test_an_unknown_network_mode_is_a_user_error():
    with pytest.raises(UserError, match="network"):
        run_python("print(1)", network="bridge")  # type: ignore[arg-type]


_AS_ORDINARY_USER = """
import json, sys, types
src = sys.argv[1]
# The package without its heavy __init__ imports (this interpreter has no numpy).
for name, path in (("mlperf_repro", src + "/mlperf_repro"), ("mlperf_repro.accuracy", src + "/mlperf_repro/accuracy")):
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module
from mlperf_repro.accuracy.sandbox import Limits, run_python
cases = json.loads(sys.argv[2])
out = {}
for name, source in cases.items():
    r = run_python(source, network="auto", limits=Limits(cpu_seconds=2, wall_seconds=3, memory_bytes=256 << 20))
    out[name] = {"rc": r.returncode, "isolation": r.isolation, "uid": r.uid, "out": r.stdout.decode(),
                 "err": r.stderr.decode()[-400:]}
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="as non-root every test above already runs this way")
def test_an_evaluator_without_root_falls_back_to_the_audit_hook(tmp_path):
    """The evaluator as an ordinary user: no uid switch, no namespaces, so the audit hook alone
    refuses fork, signals, sockets, other programs and writes outside the directory."""
    uid = (1 << 30) - 4242
    target = Path("/tmp") / f"sandbox-escape-{uuid.uuid4().hex}"
    cases = {
        "correct": "print(sum(range(5)))",
        "fork": "import os\nos.fork()",
        "kill_parent": "import os\nos.kill(os.getppid(), 9)",
        "socket": "import socket\nsocket.socket()",
        "program": "import subprocess\nsubprocess.run(['true'])",
        "write": f"open({str(target)!r}, 'w').write('x')",
        "ctypes": "import ctypes\nctypes.CDLL(None).kill(0, 9)",
    }
    import json
    import subprocess

    done = subprocess.run(
        ["/usr/bin/python3", "-I", "-c", _AS_ORDINARY_USER, str(REPO / "src"), json.dumps(cases)],
        user=uid,
        group=uid,
        extra_groups=[],
        cwd="/tmp",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    try:
        assert done.returncode == 0, done.stderr[-2000:]  # the evaluator was not killed
        results = json.loads(done.stdout)
        assert results["correct"] == {"rc": 0, "isolation": "audit-hook", "uid": None, "out": "10\n", "err": ""}
        for name in cases.keys() - {"correct"}:
            assert results[name]["rc"] == 1 and "PermissionError: sandbox:" in results[name]["err"], name
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)
        assert processes_of(uid) == []


def test_auto_falls_back_to_the_audit_hook_where_namespaces_fail(monkeypatch):
    from mlperf_repro.accuracy import sandbox

    def no_namespaces(workdir):
        raise PermissionError(1, "unshare: Operation not permitted")

    monkeypatch.setattr(sandbox, "_enter_namespaces", no_namespaces)
    sandbox.namespaces_available.cache_clear()
    try:
        assert not sandbox.namespaces_available()
        result = run_python("print('fine')")
        assert result.ok and result.isolation.startswith("audit-hook")
        with pytest.raises(UserError, match="namespace"):
            run_python("print(1)", network="namespace")
    finally:
        sandbox.namespaces_available.cache_clear()


def test_read_only_folders_are_readable_even_under_tmp_and_stay_read_only(network):
    """A checkout under /tmp (a CI clone) is hidden by the namespaces' new /tmp: the folders a
    program needs (the evaluator's sympy) are handed in with ``read_only`` and found through
    READ_ONLY_ENV, readable and not writable. (A folder of /tmp itself: pytest's own temporary
    folders are private to root, which the audit mode's uid could not enter.)"""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="sandbox-ro-", dir="/tmp"))
    os.chmod(shared, 0o755)
    (shared / "helper.py").write_text("VALUE = 41\n")
    os.chmod(shared / "helper.py", 0o644)
    source = (
        "import os, sys\n"
        f"paths = os.environ[{READ_ONLY_ENV!r}].split(os.pathsep)\n"
        "sys.path[:0] = paths\n"
        "import helper\n"
        "try:\n"
        "    open(os.path.join(paths[0], 'written'), 'w').write('x')\n"
        "    print('wrote')\n"
        "except OSError:\n"
        "    print(helper.VALUE + 1)\n"
    )
    try:
        result = run_python(source, "", SMALL, network=network, read_only=[str(shared)])
        assert result.ok and result.stdout == b"42\n", result.stderr[-500:]
        assert not (shared / "written").exists()
    finally:
        shutil.rmtree(shared)
