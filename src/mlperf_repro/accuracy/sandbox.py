"""Run one untrusted Python program (model-generated code) in a throwaway sandbox.

LiveCodeBench scoring executes what the model wrote. The reference runs it inside the
evaluator's own worker processes with a few monkey-patched builtins, which its own docstring
says is not a sandbox. Here every program gets:

* its own process in a new session (so its own process group), started by a fresh
  interpreter in isolated mode (``-I``: no environment variables, no user site, no cwd on
  ``sys.path``) with a minimal environment (PATH, LANG, HOME);
* ``resource.setrlimit`` limits set in the child before ``exec``: CPU seconds, address space,
  file size, processes, open files, no core files;
* when the evaluator is root, a uid/gid of its own (not ``nobody``: the process limit counts
  per uid, so a fork bomb in one sandbox would starve the others and anything else running
  as ``nobody``), which also keeps it from signalling the evaluator or writing where only
  root may; every process of that uid is killed after the run, so children that left the
  process group (``setsid``) die too;
* when the evaluator is root and the kernel allows it (``network="namespace"``): a new
  network namespace (no interface but a down loopback: no network at all) and a new mount
  namespace in which the whole filesystem is read-only except the working directory, which
  is bind-mounted on ``/tmp``; ``/dev/shm`` and ``/var/tmp`` are empty read-only tmpfs mounts.
  Otherwise (``network="audit"``) an audit hook in the child refuses sockets, starting other
  programs, ``os.kill``, ctypes and writes outside the working directory, and ``fork`` too
  when there is no uid of its own (best effort: see docs/sandbox.md);
* a wall-clock timeout after which its process group (and uid) is killed;
* stdout and stderr read in chunks up to a cap; past the cap the program is killed, so a
  program printing gigabytes cannot fill the evaluator's memory;
* a working directory from ``tempfile`` that is deleted afterwards.

Not covered: no seccomp filter (every system call is allowed), the filesystem stays readable,
no disk quota beyond the file-size limit, no PID namespace (``/proc`` lists the host's
processes). docs/sandbox.md says more.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import UserError

__all__ = ["READ_ONLY_ENV", "Limits", "SandboxResult", "default_python", "namespaces_available", "run_python"]

Network = Literal["auto", "namespace", "audit"]
#: Where a sandboxed program finds the folders given as ``run_python(read_only=...)``.
READ_ONLY_ENV = "MLPERF_REPRO_SANDBOX_READ_ONLY"

# Sandbox uids: far above ordinary and ``nobody`` uids, one per (evaluator pid, run slot), so
# concurrent sandboxes never share a process count and the after-run kill of "every process of
# this uid" hits no one else.
_UID_BASE = 1 << 30
_SLOTS = 256
_slot_counter = itertools.count()
_slot_lock = threading.Lock()

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and the generic (aarch64) table
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_NOSUID = 0x2

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


@dataclass(frozen=True)
class Limits:
    """Per-program limits. ``wall_seconds`` bounds the whole run, ``cpu_seconds`` the CPU
    time of each process (RLIMIT_CPU is per process)."""

    cpu_seconds: int = 10
    wall_seconds: float = 20.0
    memory_bytes: int = 1 << 30
    file_size_bytes: int = 16 << 20
    processes: int = 32
    open_files: int = 64
    output_bytes: int = 4 << 20  # each of stdout and stderr


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed run did. ``killed`` says why the sandbox (not the program) ended it."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    killed: str | None
    isolation: str
    uid: int | None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.killed is None


def _check_libc(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check_libc(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _mount_setattr(path: str, flags: int, attr_set: int, attr_clr: int) -> None:
    attr = _MountAttr(attr_set, attr_clr, 0, 0)
    _check_libc(
        _libc.syscall(
            ctypes.c_long(_SYS_MOUNT_SETATTR),
            ctypes.c_int(_AT_FDCWD),
            path.encode(),
            ctypes.c_uint(flags),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        ),
        f"mount_setattr {path}",
    )


def _enter_namespaces(workdir: str, binds: tuple[tuple[str, str], ...] = ()) -> None:
    """In the child, as root: no network, a read-only view of the filesystem, the working
    directory writable at /tmp, the other world-writable places hidden under empty tmpfs.
    ``binds``: (host folder, mount point inside the working directory) pairs, so folders the
    new /tmp would hide (a checkout under /tmp) stay readable inside it."""
    _check_libc(_libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS), "unshare")
    # Nothing mounted from here on propagates back to the host's namespace.
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    for source, target in binds:
        _mount(source, target, None, _MS_BIND | _MS_REC)
    # The working directory (with those binds) becomes /tmp, hiding the host's /tmp, then
    # everything is made read-only except that one mount (the binds inside it stay read-only).
    _mount(workdir, "/tmp", None, _MS_BIND | _MS_REC)
    for scratch in ("/dev/shm", "/var/tmp"):
        if os.path.isdir(scratch):
            _mount("tmpfs", scratch, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=1777")
    _mount_setattr("/", _AT_RECURSIVE, _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0)
    _mount_setattr("/tmp", 0, 0, _MOUNT_ATTR_RDONLY)
    os.chdir("/tmp")


def _lower(which: int, soft: int, hard: int | None = None) -> None:
    """Set a limit, never above the hard limit already in force (an ordinary user cannot
    raise it, and a lower one is what the evaluator's own environment allows anyway)."""
    hard = soft if hard is None else hard
    _, current = resource.getrlimit(which)
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(which, (soft, hard))


def _child_setup(
    limits: Limits, uid: int | None, workdir: str, namespaces: bool, binds: tuple[tuple[str, str], ...] = ()
) -> None:
    """preexec_fn: runs in the forked child before exec (after setsid)."""
    if namespaces:
        _enter_namespaces(workdir, binds)
    cpu = max(1, int(limits.cpu_seconds))
    # Soft limit sends SIGXCPU, the hard one a second later SIGKILL.
    _lower(resource.RLIMIT_CPU, cpu, cpu + 1)
    _lower(resource.RLIMIT_AS, limits.memory_bytes)
    _lower(resource.RLIMIT_FSIZE, limits.file_size_bytes)
    _lower(resource.RLIMIT_NOFILE, limits.open_files)
    _lower(resource.RLIMIT_CORE, 0)
    # Counted per real uid, and not enforced for root: it only bites after the setuid below.
    _lower(resource.RLIMIT_NPROC, limits.processes)
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


# The child's entry point. Without namespaces it first installs an audit hook (cannot be
# removed once added) that refuses sockets, starting programs (a new interpreter would lack
# the hook), ctypes, signals and writes outside the working directory, and, when the program
# runs as the evaluator's own uid (no RLIMIT_NPROC, no signal protection), fork too. Then it
# runs the program as a fresh __main__ module.
_BOOT = """\
import sys
if sys.argv[1] != "none":
    import os
    _ROOT = os.path.realpath(os.getcwd())
    _BLOCKED = ("socket.", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                "pty.spawn", "ctypes.", "os.kill", "os.killpg")
    if sys.argv[1] == "audit-same-uid":
        _BLOCKED += ("os.fork", "os.forkpty")
    _WRITES = {"os.mkdir": (0,), "os.rename": (0, 1), "os.replace": (0, 1), "os.remove": (0,), "os.rmdir": (0,),
               "os.symlink": (1,), "os.link": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,),
               "os.utime": (0,), "shutil.rmtree": (0,), "shutil.copyfile": (1,), "shutil.copytree": (1,)}
    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    def _inside(path, _root=_ROOT, _os=os):
        if isinstance(path, int):
            return True
        real = _os.path.realpath(_os.fsdecode(path))
        return real == _root or real.startswith(_root + _os.sep) or real == "/dev/null"
    def _guard(event, args, _blocked=_BLOCKED, _writes=_WRITES, _flags=_WRITE_FLAGS, _inside=_inside):
        if event.startswith(_blocked):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _flags)
            if writing and path is not None and not _inside(path):
                raise PermissionError(f"sandbox: writing {path!r} outside the working directory")
        elif event in _writes:
            for index in _writes[event]:
                if index < len(args) and args[index] is not None and not _inside(args[index]):
                    raise PermissionError(f"sandbox: {event} {args[index]!r} outside the working directory")
    sys.addaudithook(_guard)
    del _guard, _inside, os
path = sys.argv[2]
sys.argv = [path]
with open(path, "rb") as f:
    code = compile(f.read(), path, "exec")
import types
main = types.ModuleType("__main__")
main.__file__ = path
sys.modules["__main__"] = main
del types, f
exec(code, main.__dict__)
"""


@functools.cache
def namespaces_available(python: str | None = None) -> bool:
    """Whether this process can give sandboxes their own network and mount namespaces (root
    with CAP_SYS_ADMIN on a kernel with mount_setattr, 5.12+): tried once with a real run."""
    if os.geteuid() != 0:
        return False
    python = python or default_python()
    try:
        result = _run("print('ok')", b"", Limits(wall_seconds=30), network="namespace", python=python)
    except (OSError, subprocess.SubprocessError, UserError):
        return False
    return result.ok and result.stdout.strip() == b"ok"


def _reachable_by_others(path: str) -> bool:
    """Whether a process of another, unprivileged uid can execute ``path`` (every directory
    on the way searchable, the file readable and executable by others)."""
    real = os.path.realpath(path)
    try:
        if os.stat(real).st_mode & 0o005 != 0o005:
            return False
        parent = os.path.dirname(real)
        while True:
            if os.stat(parent).st_mode & 0o001 == 0:
                return False
            if parent == os.path.dirname(parent):
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


@functools.cache
def default_python() -> str:
    """The interpreter sandboxes run: this one, unless the sandbox uid could not execute it
    (e.g. a pyenv build under root's 0700 home), then the first python3 on the system path
    that it can. Programs get the standard library of that interpreter."""
    if os.geteuid() != 0 or _reachable_by_others(sys.executable):
        return sys.executable
    for candidate in ("/usr/local/bin/python3", "/usr/bin/python3", "/bin/python3"):
        if os.path.exists(candidate) and _reachable_by_others(candidate):
            return candidate
    raise UserError(
        f"the sandbox runs programs as an unprivileged uid, which cannot execute {sys.executable} "
        "and no python3 in /usr/local/bin, /usr/bin or /bin is usable; install a system python3"
    )


def _sandbox_uid() -> int | None:
    if os.geteuid() != 0:
        return None
    with _slot_lock:
        slot = next(_slot_counter) % _SLOTS
    return _UID_BASE + os.getpid() * _SLOTS + slot


def _live_processes(uid: int) -> list[int]:
    """Processes of ``uid`` that are not zombies (a zombie holds nothing but its pid slot)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def _kill_uid(uid: int) -> None:
    """Kill every process of ``uid``: kill(-1) from a process of that uid reaches exactly
    those. Repeated while any is alive, as a fork bomb may still be forking while it dies.
    (kill(-1) itself cannot say when none is left: it succeeds whenever other processes exist,
    permitted or not.)"""
    for _ in range(20):
        if not _live_processes(uid):
            return
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child only makes system calls
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


def _kill_group(proc: subprocess.Popen[bytes], uid: int | None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid is not None:
        _kill_uid(uid)


def run_python(
    source: str,
    stdin: bytes | str = b"",
    limits: Limits | None = None,
    *,
    network: Network = "auto",
    python: str | None = None,
    read_only: Sequence[str] = (),
) -> SandboxResult:
    """Run ``source`` as ``__main__`` with ``stdin`` and return what it did.

    ``read_only``: host folders the program must be able to read wherever they are (the new
    /tmp of the namespaces hides a checkout under /tmp); the program finds them, in order, in
    the environment variable :data:`READ_ONLY_ENV` (``os.pathsep``-separated).

    ``network``: ``"namespace"`` insists on the network/mount namespaces (UserError where
    they are unavailable), ``"audit"`` uses the in-process audit hook, ``"auto"`` the
    namespaces where available."""
    python = python or default_python()
    if network == "auto":
        network = "namespace" if namespaces_available(python) else "audit"
    elif network == "namespace" and not namespaces_available(python):
        raise UserError(
            "sandbox network='namespace' needs root with CAP_SYS_ADMIN and a kernel with mount_setattr (5.12+); "
            "use network='audit' or 'auto'"
        )
    elif network not in ("namespace", "audit"):
        raise UserError(f"sandbox network must be 'auto', 'namespace' or 'audit', not {network!r}")
    return _run(source, stdin, limits or Limits(), network=network, python=python, read_only=tuple(read_only))


def _run(
    source: str, stdin: bytes | str, limits: Limits, *, network: str, python: str, read_only: tuple[str, ...] = ()
) -> SandboxResult:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    uid = _sandbox_uid()
    namespaces = network == "namespace"
    workdir = tempfile.mkdtemp(prefix="mlperf-sandbox-")
    try:
        program = os.path.join(workdir, "main.py")
        with open(program, "w", encoding="utf-8") as handle:
            handle.write(source)
        if uid is not None:
            os.chown(workdir, uid, uid)
        os.chmod(workdir, 0o700)
        inner_program = "/tmp/main.py" if namespaces else program
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp" if namespaces else workdir}
        binds: tuple[tuple[str, str], ...] = ()
        if read_only and namespaces:
            os.makedirs(os.path.join(workdir, "ro"), mode=0o755)
            binds = tuple((os.path.realpath(p), os.path.join(workdir, "ro", str(i))) for i, p in enumerate(read_only))
            for _, target in binds:
                os.mkdir(target, 0o755)
            env[READ_ONLY_ENV] = os.pathsep.join(f"/tmp/ro/{i}" for i in range(len(read_only)))
        elif read_only:
            env[READ_ONLY_ENV] = os.pathsep.join(read_only)
        policy = "none" if namespaces else ("audit" if uid is not None else "audit-same-uid")
        isolation = ("namespaces" if namespaces else "audit-hook") + (f", uid {uid}" if uid is not None else "")
        try:
            proc = _start(python, policy, inner_program, workdir, env, limits, uid, namespaces, binds)
        except (OSError, subprocess.SubprocessError) as exc:
            raise UserError(
                f"cannot start a sandboxed program ({isolation}, interpreter {python}): {exc}; "
                "see docs/sandbox.md for what the sandbox needs"
            ) from exc
        try:
            return _communicate(proc, data, limits, uid, isolation)
        finally:
            _kill_group(proc, uid)
            if proc.poll() is None:
                proc.wait()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _start(
    python: str,
    policy: str,
    program: str,
    workdir: str,
    env: dict[str, str],
    limits: Limits,
    uid: int | None,
    namespaces: bool,
    binds: tuple[tuple[str, str], ...] = (),
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [python, "-I", "-B", "-c", _BOOT, policy, program],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
        env=env,
        start_new_session=True,
        preexec_fn=functools.partial(_child_setup, limits, uid, workdir, namespaces, binds),
    )


def _communicate(
    proc: subprocess.Popen[bytes], data: bytes, limits: Limits, uid: int | None, isolation: str
) -> SandboxResult:
    """Feed stdin and read both pipes up to the cap until the program and its pipes are done,
    the cap is passed or the wall clock runs out."""
    assert proc.stdin and proc.stdout and proc.stderr
    deadline = time.monotonic() + limits.wall_seconds
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    names = {out_fd: "stdout", err_fd: "stderr"}
    selector = selectors.DefaultSelector()
    for fd in buffers:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    stdin_fd = proc.stdin.fileno()
    offset = 0
    if data:
        os.set_blocking(stdin_fd, False)
        selector.register(stdin_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    killed: str | None = None
    timed_out = False
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out, killed = True, f"wall-clock timeout ({limits.wall_seconds:g} s)"
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            # The program has exited but something it started still holds a pipe open.
            if exited_at is not None and now - exited_at > 0.5:
                break
            for key, _ in selector.select(timeout=min(0.05, deadline - now)):
                fd = key.fd
                if fd == stdin_fd:
                    try:
                        offset += os.write(fd, data[offset : offset + 65536])
                    except (BrokenPipeError, OSError):
                        offset = len(data)
                    if offset >= len(data):
                        selector.unregister(fd)
                        proc.stdin.close()
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    selector.unregister(fd)
                    continue
                buffer = buffers[fd]
                room = limits.output_bytes - len(buffer)
                buffer += chunk[:room]
                if len(chunk) > room:
                    killed = f"{names[fd]} over {limits.output_bytes} bytes"
                    break
            if killed:
                break
    finally:
        selector.close()
        if killed:
            _kill_group(proc, uid)
        try:
            # Pipes closed (or the program done): it may still be running, e.g. after closing
            # stdout; it gets the rest of its wall-clock time.
            proc.wait(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out, killed = True, f"wall-clock timeout ({limits.wall_seconds:g} s)"
            _kill_group(proc, uid)
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
    returncode = proc.returncode
    if killed is None and returncode in (-signal.SIGXCPU, -signal.SIGKILL) and not timed_out:
        # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one.
        killed = f"CPU time limit ({limits.cpu_seconds} s)" if returncode == -signal.SIGXCPU else None
    return SandboxResult(
        returncode=returncode,
        stdout=bytes(buffers[out_fd]),
        stderr=bytes(buffers[err_fd]),
        timed_out=timed_out,
        killed=killed,
        isolation=isolation,
        uid=uid,
    )
