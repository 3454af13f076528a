"""Which process a shared server's supervisor watches (launch/shared.py ``workflow_pid``): the
Snakemake process itself, never a wrapper whose arguments mention it. A ``bash -c '... snakemake
...'`` or ``strace ... snakemake`` above the workflow outlives it, and a supervisor watching one
kept its servers (and a tracer waiting for them) alive until the idle timeout: found by
tests/test_bundle_offline.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mlperf_repro.launch.shared import is_snakemake


def test_snakemake_itself_in_each_form():
    for argv in (
        ["snakemake", "--cores", "2"],
        ["/work/.venv/bin/snakemake", "-n"],
        ["/work/.venv/bin/python", "/work/.venv/bin/snakemake", "--cores", "2"],
        ["python3.11", "-m", "snakemake", "all"],
    ):
        assert is_snakemake([a.encode() for a in argv]), argv


def test_wrappers_that_mention_it_are_not_it():
    for argv in (
        ["bash", "-c", "set -e; .venv/bin/snakemake --cores 2"],
        ["strace", "-f", "-o", "t", "bash", "-c", "snakemake"],
        ["unshare", "-n", "bash", "-c", "ip link set lo up && strace snakemake"],
        ["timeout", "600", "snakemake"],
        ["python", "-c", "import snakemake"],
        ["vim", "snakemake.log"],
        [],
    ):
        assert not is_snakemake([a.encode() for a in argv]), argv


@given(st.lists(st.binary(max_size=20), max_size=6))
def test_any_command_line_is_read_without_error(argv):
    assert is_snakemake(argv) in (True, False)
