"""The README's and the guides' commands are tested like code (mlperf_repro.doccheck).

Every fenced command block of README.md and docs/ names the test that runs it or says why it
cannot run here; every relative link of the docs resolves. The blocks whose marker names
``test_block_runs`` run here as written, those naming ``test_block_dry_runs`` with ``-n``
given to every snakemake (the real run is another test's: test_e2e.py, test_wan_demo.py), each
in a temporary copy of the workflow where ``.venv`` is this checkout's and ``my.yaml`` is a
copy of the default config (the guides' name for "your config")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import DEFAULT_CONFIG, REPO, make_workdir

from mlperf_repro import doccheck

THIS = "tests/test_docs_commands.py"


def blocks_run_by(test: str) -> list[doccheck.Block]:
    """The command blocks of README.md and docs/ whose run-by marker names ``test``."""
    found = []
    for path in doccheck.doc_files(REPO, doccheck.COMMAND_DOCS):
        found += [b for b in doccheck.parse(path).blocks if f"{THIS}::{test}" in b.targets]
    return found


def block_id(block: doccheck.Block) -> str:
    return block.where(REPO)


def workdir(tmp_path: Path) -> Path:
    """A copy of the workflow's files with this checkout's environments and ``my.yaml``."""
    work = make_workdir(tmp_path)
    shutil.copytree(REPO / "profiles", work / "profiles")
    shutil.copytree(REPO / "tests" / "configs", work / "tests" / "configs")
    for venv in (".venv", ".venv-quark", ".venv-vbench"):
        if (REPO / venv).exists():
            (work / venv).symlink_to((REPO / venv).resolve())
    shutil.copyfile(DEFAULT_CONFIG, work / "my.yaml")
    return work


def run_shell(work: Path, script: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


def as_dry_run(command: str) -> str:
    """``command`` with ``-n`` after every snakemake and ./install.sh left out (the install
    runs in .ci/run; here the environment is the checkout's)."""
    command = re.sub(r"(^|[\s;&|(])(\./install\.sh)((?:\s+--[\w-]+)*)", r"\1true", command)
    return re.sub(r"(^|[\s;&|(])((?:\S*/)?snakemake)(?=\s|$)", r"\1\2 -n", command)


# -- the markers and the links (no command runs) ------------------------------------------


def test_every_command_block_is_marked_and_names_a_test_that_exists():
    assert doccheck.check_blocks(REPO) == []


def test_every_relative_link_resolves():
    assert doccheck.check_links(REPO) == []


def test_the_checks_find_an_unmarked_block_a_missing_test_and_a_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_here():\n    pass\n")
    (tmp_path / "ci").write_text("./install.sh\n./test.sh\n")
    (tmp_path / "README.md").write_text(
        "# Top\n\n## Run it\n\n[ok](docs/a.md#part-two-x) [self](#run-it) [web](https://example.com/x)\n"
        "[gone](docs/missing.md) [bad anchor](docs/a.md#nowhere) `[code](not/a/link.md)`\n\n"
        "```bash\necho unmarked\n```\n\n"
        "<!-- run-by: tests/test_x.py::test_here -->\n```bash\necho fine\n```\n\n"
        "<!-- run-by: tests/test_x.py::test_gone -->\n```sh\necho missing test\n```\n\n"
        "<!-- not-run: -->\n```console\n$ echo no reason\n```\n\n"
        "<!-- run-by: ci -->\n```bash\n./install.sh && ./test.sh   # both in ci\n```\n\n"
        "<!-- run-by: ci -->\n```bash\n./other.sh\n```\n\n"
        "<!-- not-run: a stray marker before prose -->\nSome text.\n\n"
        "```text\nnot a command\n```\n"
    )
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Part two: `x`\n")
    links = doccheck.check_links(tmp_path)
    assert [p.split(": ", 1)[1] for p in links] == [
        "docs/missing.md: docs/missing.md does not exist",
        "docs/a.md#nowhere: no heading #nowhere in a.md",
    ]
    blocks = doccheck.check_blocks(tmp_path)
    assert [p.split(": put <!--")[0] for p in blocks] == [
        "README.md:37: a run-by/not-run marker must come right before a command block",
        "README.md:8: a bash block without a marker",
        "README.md:18: run-by names tests/test_x.py::test_gone, but tests/test_x.py defines no test_gone",
        "README.md:23: not-run needs the reason it cannot run here",
        "README.md:33: run-by names ci, which does not run: ./other.sh",
    ]


def test_commands_join_continuations_and_read_console_prompts():
    bash = doccheck.Block(Path("x.md"), 1, "bash", "# comment\n.venv/bin/x a \\\n    b   # note\n\ny\n")
    assert doccheck.commands(bash) == [".venv/bin/x a b   # note", "y"]
    assert doccheck.simple_commands(doccheck.Block(Path("x.md"), 1, "sh", "a && b # c\n")) == ["a", "b"]
    console = doccheck.Block(Path("x.md"), 1, "console", "$ mlperf-repro plan\noutput line\n$ ls\n")
    assert doccheck.commands(console) == ["mlperf-repro plan", "ls"]


def test_github_anchors():
    assert doccheck.slug("wan-2.2-t2v-a14b: text to video") == "wan-22-t2v-a14b-text-to-video"
    assert doccheck.slug("`repeats` and `packaged_repeat`") == "repeats-and-packaged_repeat"
    assert doccheck.slug("See [the guide](x.md)") == "see-the-guide"


def test_a_dry_run_gives_every_snakemake_n_and_skips_the_install():
    assert as_dry_run("./install.sh && .venv/bin/snakemake --cores all") == "true && .venv/bin/snakemake -n --cores all"
    assert as_dry_run("snakemake --unlock; x/snakemake-executor-plugin y") == (
        "snakemake -n --unlock; x/snakemake-executor-plugin y"
    )


def test_the_module_runs_as_a_command():
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-m", "mlperf_repro.doccheck", "--root", str(REPO)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


# -- the commands ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("block", blocks_run_by("test_block_runs"), ids=block_id)
def test_block_runs(block, tmp_path):
    """The block as written, in a fresh copy of the workflow."""
    done = run_shell(workdir(tmp_path), block.text)
    assert done.returncode == 0, f"{block_id(block)}:\n{block.text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("block", blocks_run_by("test_block_dry_runs"), ids=block_id)
def test_block_dry_runs(block, tmp_path):
    """The block with ``-n`` given to snakemake: the DAG of exactly that command, its flags,
    profile and config, is built, and nothing runs."""
    script = "\n".join(as_dry_run(c) for c in doccheck.commands(block))
    done = run_shell(workdir(tmp_path), script)
    assert done.returncode == 0, f"{block_id(block)}:\n{script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "This was a dry-run" in done.stdout + done.stderr


@pytest.mark.slow
def test_reproduce_walkthrough(tmp_path, monkeypatch):
    """docs/reproduce.md's import and first run, on a synthetic tree in the layout AMD publishes
    (tests/published_tree.py) at the path and with the names the guide uses: the import writes
    my.yaml, the plan view prices it, and the first run stops in the preflight, before any job,
    naming each TODO: value."""
    import published_tree

    imported, first_run = blocks_run_by("test_reproduce_walkthrough")
    work = workdir(tmp_path)
    (work / "my.yaml").unlink()
    monkeypatch.setattr(published_tree, "SYSTEM", "8xMI355X_2xEPYC_9575F")
    published_tree.write_published(
        work / "inference_results_v6.0",
        "AMD",
        scenarios={"Offline": 370.0, "Server": 360.0, "Interactive": 263.0},
    )
    done = run_shell(work, imported.text)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "8xMI355X_2xEPYC_9575F" in (work / "my.yaml").read_text()
    assert "GPU-hours" in done.stdout
    # What import says to run next is the command the guide gives.
    assert "`snakemake --cores all --configfile my.yaml` names each" in done.stdout

    done = run_shell(work, first_run.text, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "the preflight check found problems" in output
    todo_lines = [line for line in output.splitlines() if "[ERROR] placeholder:" in line]
    assert len(todo_lines) >= 2 and all("TODO" in line for line in todo_lines), output[-3000:]
    assert not (work / "results" / "runs").exists()
