"""GPU screening of every node of a real SLURM allocation (the one-node test cluster, no GPU)."""

from __future__ import annotations

import socket

import pytest

from mlperf_repro.cluster import screen
from mlperf_repro.errors import UserError

# A real SLURM cluster is started for these (tests/cluster/slurm.py): not in the fast loop.
pytestmark = pytest.mark.slow


def test_every_node_of_a_slurm_allocation(slurm_cluster):
    """One srun task per node of a real (one-node, GPU-less) SLURM allocation reports its devices."""
    srun = ("srun", f"--partition={slurm_cluster.partition}", "--nodes=1", "--time=5")
    nodes = screen.screen_allocation({"repeats": 1, "matmul_size": 64}, expected_per_node=0, timeout_s=180, srun=srun)
    assert [n["host"] for n in nodes] == [socket.gethostname()]
    assert nodes[0]["devices"] == []
    assert screen.decide_allocation(nodes, policy="refuse")["note"] == "ran on 0 of 0 GPUs"
    nodes = screen.screen_allocation({"repeats": 1, "matmul_size": 64}, expected_per_node=8, timeout_s=180, srun=srun)
    with pytest.raises(UserError, match=f"on {socket.gethostname()} .*0 of 8 expected devices visible"):
        screen.decide_allocation(nodes, policy="refuse", system="mi355x-11-nodes")
