"""The air-gapped path, proved: a bundle built for the test config, then, inside a network namespace
whose only interface is the loopback, a fresh clone installed from the bundle alone and a real
LoadGen run of the workflow (the whole DAG dry-run too), every process traced: any connection
to an address that is not the loopback fails the test, as does any install or run failure.

The loopback is up because the workflow's own vLLM server and LoadGen head talk over
127.0.0.1 (and vLLM's single-process distributed setup binds it); nothing reaches outside it.
SLURM's own clients, which ask the site's controller, are the one exception (SITE_SCHEDULER).
Skipped, saying why, where a network namespace cannot be made (not root, no unshare) or strace
is missing. A second test damages one file of a bundle and expects install.sh's clear refusal.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO

pytestmark = pytest.mark.slow

E2E = REPO / "tests/configs/e2e.yaml"
SYSTEM, BENCH = "cpu-2c-vllm", "tiny-llama-mxfp4"
TARGET = f"results/runs/{SYSTEM}/{BENCH}/Offline/performance"
# connect() to an IPv4/IPv6 address in strace's output; AF_UNIX and AF_NETLINK are local.
CONNECT = re.compile(
    r'(?:connect|sendto)\(.*?\{sa_family=AF_INET6?, [^}]*?inet_(?:pton|addr)\((?:AF_INET6?, )?"([^"]+)"'
)
LOOPBACK = ("127.", "::1", "::ffff:127.")
# SLURM's clients ask the site's own controller (here, where the test cluster's tools are
# installed, resolving its host): the snakemake SLURM executor plugin runs `scontrol show config`
# whenever Snakemake starts. That is the site's scheduler, which an air-gapped site has, not a
# connection out of it.
SITE_SCHEDULER = ("scontrol", "sinfo", "squeue", "sacct", "sbatch", "srun", "scancel")


def _netns_available() -> str | None:
    if os.geteuid() != 0:
        return "a network namespace needs root (unshare -n)"
    if shutil.which("unshare") is None or shutil.which("strace") is None:
        return "unshare or strace is not installed (apt-get install util-linux strace)"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare -n is not allowed here: {probe.stderr.strip()}"
    return None


def _offline(script: str, cwd: Path, trace: Path, timeout: int) -> subprocess.CompletedProcess:
    """``script`` (bash) in a new network namespace with only the loopback up, every process's
    connect() and sendto() recorded in ``trace``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env["PIP_CONFIG_FILE"] = os.devnull  # the site's pip configuration names indexes: the bundle is the only one
    inner = f"ip link set lo up && strace -f -qq --seccomp-bpf -e trace=connect,sendto,execve -o {trace} bash -c {_quote(script)}"
    return subprocess.run(
        ["unshare", "-n", "bash", "-c", inner], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _outside_connections(trace: Path) -> list[str]:
    """Each connect/sendto to an address off the loopback, with the command its process ran."""
    lines = trace.read_text(errors="replace").splitlines() if trace.is_file() else []
    commands: dict[str, str] = {}
    out = []
    for line in lines:
        pid = line.split(" ", 1)[0]
        if " execve(" in line and "= 0" in line.rsplit(")", 1)[-1]:
            commands[pid] = line.split(" execve(", 1)[1][:300]
        elif (m := CONNECT.search(line)) and not m.group(1).startswith(LOOPBACK):
            program = Path(commands.get(pid, "").split('"', 2)[1] if '"' in commands.get(pid, "") else "").name
            if program not in SITE_SCHEDULER:
                out.append(f"{commands.get(pid, '(command not traced)')}: {line[:200]}")
    return out


@pytest.fixture(scope="module")
def offline_bundle(tmp_path_factory):
    why = _netns_available()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("offline")
    config = yaml.safe_load(E2E.read_text())
    config["systems"][SYSTEM]["benchmarks"][BENCH] = {
        "Offline": config["systems"][SYSTEM]["benchmarks"][BENCH]["Offline"]
    }
    configfile = root / "offline.yaml"
    configfile.write_text(yaml.safe_dump(config))
    built = subprocess.run(
        [str(REPO / ".venv/bin/mlperf-repro"), "bundle", "--configfile", str(configfile), "-o", str(root / "bundle")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    assert "not in the bundle" not in built.stdout, built.stdout
    yield root, configfile
    # A bundle holds a gigabyte of wheels: not left for pytest's kept temporary folders, where
    # it took the disk space the other tests' preflight checks count on.
    shutil.rmtree(root, ignore_errors=True)


def test_a_fresh_clone_installs_and_runs_from_the_bundle_with_no_network(offline_bundle, tmp_path):
    root, configfile = offline_bundle
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    shutil.copyfile(configfile, clone / "offline.yaml")
    trace = tmp_path / "connect.trace"
    script = (
        f"set -e; ./install.sh --from-bundle {root / 'bundle'} && "
        f"export MLPERF_REPRO_BUNDLE={root / 'bundle'} && "
        ".venv/bin/snakemake -n --cores 2 --configfile offline.yaml >/dev/null && "
        f".venv/bin/snakemake {TARGET} --cores 2 --configfile offline.yaml"
    )
    done = _offline(script, clone, trace, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert _outside_connections(trace) == []
    # The run is real: LoadGen's summary, and the model came from the bundle, its source the config's.
    summary = (clone / TARGET / "mlperf_log_summary.txt").read_text()
    assert "Result is : VALID" in summary
    record = yaml.safe_load((clone / "results/acquire/models/tiny-llama.json").read_text())
    assert record["source"] == "file://artifacts/models/tiny-llama" and str(root / "bundle") in record["bundle"]
    shutil.rmtree(clone / ".venv")  # its installed environment, several gigabytes; the trace and logs stay


def test_a_damaged_bundle_is_refused_before_anything_is_installed(offline_bundle, tmp_path):
    root, _ = offline_bundle
    damaged = tmp_path / "bundle"
    shutil.copytree(root / "bundle", damaged, copy_function=os.link)  # hard links: no copy of 1 GB
    wheel = next((damaged / "wheels/workflow").glob("six-*.whl"), None) or next(
        (damaged / "wheels/workflow").glob("*.whl")
    )
    wheel.unlink()
    wheel.write_bytes(b"not a wheel")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    done = _offline(f"./install.sh --from-bundle {damaged}", clone, tmp_path / "trace", timeout=300)
    assert done.returncode == 1
    assert f"wheels/workflow/{wheel.name}: its sha256 differs" in done.stderr
    assert "nothing was installed" in done.stderr and not (clone / ".venv").exists()
    shutil.rmtree(damaged)  # hard links to the bundle's wheels: they would keep its gigabyte alive
