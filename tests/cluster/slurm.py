"""A real one-node SLURM cluster for the tests: Debian's slurm-wlm 22.05 and munge started as
plain daemons on localhost, no slurmdbd (the workflow's profile asks ``squeue`` for job states).

The recipe and its pitfalls, as measured on this kind of machine:
- the config must be at /etc/slurm/slurm.conf (a symlink here): the slurm-jobstep plugin strips
  ``SLURM_CONF`` before the in-job ``srun``;
- no cgroup plugins (a container has no delegated cgroup tree), everything runs as root;
- ``MinJobAge=600`` keeps finished jobs in ``squeue``/``scontrol`` long enough for the plugin's
  status checks and for the tests to read what each job was granted;
- while the cluster runs, ``/usr/local/bin/sacct`` answers the plugin's job-state query
  (``sacct ... --name <run id>``) from ``squeue``, as a site with slurmdbd would; other calls go
  to the real ``sacct``. snakemake-executor-plugin-slurm 2.8.0 switches a status cycle to sacct
  whenever its ``scontrol show config`` call takes over 10 s (seen under the suite's load), and a
  cycle in which sacct answers nothing drops every job it waits for: the workflow then waits
  until its timeout (profiles/slurm/config.yaml says so for users).

Every wait has a hard timeout: a broken cluster fails the caller, it never hangs it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
SLURM_CONF = Path("/etc/slurm/slurm.conf")
PARTITION = "debug"
# One fixture at a time on a machine: slurmctld and slurmd bind fixed ports.
LOCK_FILE = Path("/run/lock/mlperf-repro-slurm.lock")
MUNGE_PID = Path("/run/munge/munged.pid")
SLURMCTLD_PORT = 6817


class SlurmError(RuntimeError):
    """The cluster could not be installed, started or stopped; the message says why."""


@dataclass
class SlurmCluster:
    root: Path  # state, spool, pid and log files; removed on stop
    node: str
    cpus: int
    real_memory_mb: int
    partition: str
    start_seconds: float  # daemons started until the node reported idle
    own_munged: bool  # False when a munged was already running (then it is left alone)
    lock_fd: int

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    def logs_tail(self, chars: int = 3000) -> str:
        """The daemons' log tails, for failure messages."""
        parts = []
        for log in sorted(self.log_dir.glob("*.log")):
            parts.append(f"== {log.name}\n{log.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)


def run(cmd: list[str], timeout: float, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """One command with a hard timeout; a failure names the command and its output."""
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as err:
        raise SlurmError(f"{' '.join(cmd)} did not finish within {timeout} s") from err
    if check and result.returncode != 0:
        raise SlurmError(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result


def tool(name: str) -> str | None:
    """A program's path; the daemons live in /usr/sbin, which a CI PATH may leave out."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def ensure_installed(timeout: float = 600) -> None:
    """Install Debian's SLURM and munge with apt-get when slurmctld is missing."""
    if all(tool(name) for name in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    if os.geteuid() != 0:
        raise SlurmError(f"SLURM is not installed and installing it needs root: apt-get install {' '.join(PACKAGES)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    deadline = time.monotonic() + timeout
    try:
        run(["apt-get", "update", "-qq"], timeout=deadline - time.monotonic(), env=env)
        run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
            timeout=max(1.0, deadline - time.monotonic()),
            env=env,
        )
    except SlurmError as err:
        raise SlurmError(f"could not install SLURM ({' '.join(PACKAGES)}) with apt-get: {err}") from err
    if not tool("slurmctld"):
        raise SlurmError("apt-get finished but slurmctld is still missing")


def _mem_total_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise SlurmError("no MemTotal in /proc/meminfo")


def _slurm_conf(root: Path, node: str, cpus: int, real_memory_mb: int) -> str:
    state, run_dir, log = root / "state", root / "run", root / "log"
    return f"""\
# Written by tests/cluster/slurm.py for a one-node test cluster.
ClusterName=testcluster
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ReturnToService=2
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/d
SlurmctldPidFile={run_dir}/slurmctld.pid
SlurmdPidFile={run_dir}/slurmd.pid
SlurmctldLogFile={log}/slurmctld.log
SlurmdLogFile={log}/slurmd.log
# No cgroup plugins: a container has no cgroup tree of its own to delegate.
# The node offers the CPU count below even where the host has fewer cores (see start()).
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# Finished jobs stay visible to squeue/scontrol for 10 minutes: no slurmdbd, so the executor
# plugin reads end states from squeue, and the tests read what each job was granted.
MinJobAge=600
KillWait=5
# A submitted job starts within a second: batch jobs are scheduled at once, not up to 3 s later
# (batch_sched_delay), and a job that the main scheduler passes over while a bigger one waits
# is backfilled within a second rather than 30 s (bf_interval). The job-start and time-limit
# checks of slurmctld's background loop (every second; time limits every 30 s) have no setting.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={real_memory_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stop_pid(pid_file: Path, timeout: float = 10) -> None:
    """TERM the daemon named by a pid file and wait for it; KILL it after ``timeout``."""
    pid = _read_pid(pid_file)
    if pid is None or not _pid_alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.1)


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _munge_works() -> bool:
    try:
        encoded = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        if encoded.returncode != 0:
            return False
        decoded = subprocess.run(["unmunge"], input=encoded.stdout, capture_output=True, timeout=10)
        return decoded.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _start_munged() -> bool:
    """Start munged as the munge user; False when a working one was already running."""
    if _munge_works():
        return False
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        run([tool("mungekey") or "mungekey", "--create"], timeout=30)
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    run(
        [tool("runuser") or "runuser", "-u", "munge", "--", tool("munged") or "munged", f"--pid-file={MUNGE_PID}"],
        timeout=30,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if _munge_works():
            return True
        time.sleep(0.1)
    raise SlurmError("munged started but munge -n | unmunge still fails after 15 s")


SACCT_STAND_IN = Path("/usr/local/bin/sacct")
SACCT_MARKER = "# mlperf-repro test cluster: job states from squeue"


def _install_sacct_stand_in() -> None:
    real = shutil.which("sacct", path="/usr/bin:/bin")
    if not real or (SACCT_STAND_IN.exists() and SACCT_MARKER not in SACCT_STAND_IN.read_text(errors="replace")):
        return  # no sacct to stand in for, or someone else's program there
    SACCT_STAND_IN.parent.mkdir(parents=True, exist_ok=True)
    SACCT_STAND_IN.write_text(
        "#!/bin/sh\n"
        f"{SACCT_MARKER}\n"
        'name=""; previous=""\n'
        'for arg in "$@"; do\n'
        '    [ "$previous" = "--name" ] && name="$arg"\n'
        '    case "$arg" in --name=*) name="${arg#--name=}" ;; esac\n'
        '    previous="$arg"\n'
        "done\n"
        f'[ -n "$name" ] || exec {real} "$@"\n'
        "exec squeue --states=all --noheader --format='%i|%T' --name \"$name\"\n"
    )
    SACCT_STAND_IN.chmod(0o755)


def _remove_sacct_stand_in() -> None:
    if SACCT_STAND_IN.exists() and SACCT_MARKER in SACCT_STAND_IN.read_text(errors="replace"):
        SACCT_STAND_IN.unlink()


def _remove_stale_cluster() -> None:
    """A symlinked config left by a test session that died: stop its daemons, drop the link.
    A real (non-symlink) config belongs to someone else and is never touched."""
    if SLURM_CONF.is_symlink():
        stale_root = Path(os.readlink(SLURM_CONF)).parent
        for name in ("slurmd.pid", "slurmctld.pid"):
            _stop_pid(stale_root / "run" / name)
        SLURM_CONF.unlink()
    elif SLURM_CONF.exists():
        raise SlurmError(f"{SLURM_CONF} exists and was not made by the test fixture; refusing to replace it")


def _wait_idle(cluster: SlurmCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        result = run(["sinfo", "-h", "-N", "-o", "%T"], timeout=10, check=False)
        state = result.stdout.strip()
        if result.returncode == 0 and state == "idle":
            return
        time.sleep(0.2)
    raise SlurmError(f"node {cluster.node} not idle after {timeout} s (sinfo says {state!r})\n{cluster.logs_tail()}")


def _acquire_lock(timeout: float) -> int:
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise SlurmError(
                    f"another test session has held the SLURM fixture ({LOCK_FILE}) for {timeout} s"
                ) from None
            time.sleep(1)


def start(cpu_slots_per_core: int = 6, lock_timeout: float = 900, idle_timeout: float = 60) -> SlurmCluster:
    """Install if needed, then start munged, slurmctld and slurmd; return once the node is idle.

    The node offers ``cpu_slots_per_core`` CPUs per host core: the test jobs mostly sleep or
    wait (on each other, on status checks), and the SLURM tests run all at once
    (tests/cluster/concurrent.py), up to 11 CPUs' worth of jobs together: on a 2-core host
    they would otherwise queue behind a job that sleeps for minutes (the time-limit test)."""
    ensure_installed()
    lock_fd = _acquire_lock(lock_timeout)
    root = None
    try:
        _remove_stale_cluster()
        _install_sacct_stand_in()
        if _port_in_use(SLURMCTLD_PORT):
            raise SlurmError(f"port {SLURMCTLD_PORT} is in use: a slurmctld not started by the fixture is running")
        root = Path(tempfile.mkdtemp(prefix="mlperf-repro-slurm-"))
        for sub in ("state/ctld", "state/d", "run", "log"):
            (root / sub).mkdir(parents=True)
        node = socket.gethostname().split(".")[0]
        cpus = (os.cpu_count() or 1) * cpu_slots_per_core
        # Leave the OS 1 GB, as the measured recipe does.
        real_memory_mb = _mem_total_mb() - 1024
        (root / "slurm.conf").write_text(_slurm_conf(root, node, cpus, real_memory_mb))
        SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
        SLURM_CONF.symlink_to(root / "slurm.conf")
        began = time.monotonic()
        own_munged = _start_munged()
        cluster = SlurmCluster(
            root=root,
            node=node,
            cpus=cpus,
            real_memory_mb=real_memory_mb,
            partition=PARTITION,
            start_seconds=0.0,
            own_munged=own_munged,
            lock_fd=lock_fd,
        )
        try:
            run([tool("slurmctld") or "slurmctld", "-f", str(SLURM_CONF)], timeout=30)
            run([tool("slurmd") or "slurmd", "-f", str(SLURM_CONF)], timeout=30)
            _wait_idle(cluster, idle_timeout)
        except BaseException:
            try:
                stop(cluster, release_lock=False)  # released below, once
            except SlurmError:
                pass  # the start failure is the error worth reporting
            raise
        cluster.start_seconds = time.monotonic() - began
        return cluster
    except BaseException:
        _remove_sacct_stand_in()
        if root is not None:
            if SLURM_CONF.is_symlink() and Path(os.readlink(SLURM_CONF)) == root / "slurm.conf":
                SLURM_CONF.unlink()
            shutil.rmtree(root, ignore_errors=True)
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)
        raise


def cancel_all(timeout: float = 60) -> None:
    """Cancel every job and wait until none is pending, running or completing (a slurmstepd
    can outlive a slurmd that stops under it)."""
    run(["scancel", "--user=root"], timeout=15, check=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = run(["squeue", "-h", "-t", "PD,R,CG,CF,S", "-o", "%i"], timeout=10, check=False)
        if result.returncode != 0 or not result.stdout.strip():
            return
        time.sleep(0.5)
    raise SlurmError(f"jobs still active {timeout} s after scancel: {result.stdout.split()}")


def stop(cluster: SlurmCluster, release_lock: bool = True) -> None:
    """Cancel all jobs, stop the daemons by pid file, remove the config link and the state."""
    errors = []
    try:
        cancel_all()
    except SlurmError as err:
        errors.append(str(err))
    for name in ("slurmd.pid", "slurmctld.pid"):
        _stop_pid(cluster.root / "run" / name)
    if cluster.own_munged:
        _stop_pid(MUNGE_PID)
    if SLURM_CONF.is_symlink():
        SLURM_CONF.unlink()
    _remove_sacct_stand_in()
    shutil.rmtree(cluster.root, ignore_errors=True)
    if release_lock:
        fcntl.flock(cluster.lock_fd, fcntl.LOCK_UN)
        os.close(cluster.lock_fd)
    if errors:
        raise SlurmError("; ".join(errors))


def job_fields(job_id: str, timeout: float = 10) -> dict[str, str]:
    """``scontrol show job`` as a dict (e.g. NumCPUs, TimeLimit, JobState, Reason, MinMemoryNode)."""
    out = run(["scontrol", "-o", "show", "job", job_id], timeout=timeout).stdout
    fields = {}
    for token in out.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


def _job_pids(job_id: str, timeout: float) -> tuple[set[int], set[str]]:
    """``scontrol listpids``: the job's processes and the steps they belong to."""
    out = run(["scontrol", "listpids", job_id], timeout=timeout, check=False).stdout
    rows = [line.split() for line in out.splitlines()[1:]]
    rows = [row for row in rows if len(row) >= 3 and row[0].isdigit()]
    return {int(row[0]) for row in rows}, {row[2] for row in rows}


def kill_job_processes(job_id: str, timeout: float = 10) -> None:
    """Kill every process of a job at once, as when its node loses power: all are frozen
    first, then killed, so none can react (scancel, or a kill of one step, lets the in-job
    Snakemake clean up after itself, which a dead node never does).

    The processes are listed until a listing names the batch step and no process the earlier
    ones missed: slurmd asks each step's slurmstepd for its processes, and on a loaded 2-core
    host one kill left the batch step's srun and Snakemake alive (srun logged "forcing job
    termination"), so Snakemake saw its step fail and removed the half-written output."""
    frozen: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids, steps = _job_pids(job_id, timeout=max(1.0, deadline - time.monotonic()))
        new = pids - frozen
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        frozen |= new
        if frozen and not new and "batch" in steps:
            break
        if time.monotonic() > deadline:
            raise SlurmError(f"job {job_id}: no complete list of its processes within {timeout} s (steps {steps})")
        time.sleep(0.2)
    for pid in frozen:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
