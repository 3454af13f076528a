"""Snakemake's command line with the SLURM executor plugin's status checks at most
``MLPERF_REPRO_TEST_STATUS_CHECK_MAX_S`` seconds apart (default 2): how the SLURM tests run it.

Why: snakemake-executor-plugin-slurm 2.8.0 waits 10 s longer after every status check in which
none of the workflow's jobs finished (up to 180 s), a step no setting changes. On a real
cluster that spares slurmctld; on the tests' one-node cluster it left each finished job unseen
for 10-30 s, a quarter of the SLURM tests' wall time. Only the submit host's polling cadence
changes here: what the plugin submits, how it reads job states and what it reports are its own.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this folder heads sys.path, and its concurrent.py would hide the standard
# library's concurrent package from Snakemake.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import snakemake_executor_plugin_slurm as slurm_plugin
from snakemake.cli import main
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

MAX_SECONDS = float(os.environ.get("MLPERF_REPRO_TEST_STATUS_CHECK_MAX_S", "2"))

_interval = RemoteExecutor.next_seconds_between_status_checks


def _set_capped(executor, seconds):
    _interval.fset(executor, seconds if seconds is None else min(seconds, MAX_SECONDS))


slurm_plugin.Executor.next_seconds_between_status_checks = property(_interval.fget, _set_capped)

if __name__ == "__main__":
    sys.argv[0] = "snakemake"
    main()
