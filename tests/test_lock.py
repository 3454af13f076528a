"""The lock file (mlperf-repro lock) and the workflow's check of its environment against it."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from conftest import DEFAULT_CONFIG, SCHEMA, make_workdir, run_snakemake

from mlperf_repro import provenance
from mlperf_repro.benchmarks import load_round
from mlperf_repro.cli import main
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.fetch import acquire
from mlperf_repro.hashing import sha256_file
from mlperf_repro.lock import (
    LOCK_FORMAT,
    check_environment,
    lock_differences,
    lock_path,
    read_lock,
    resolve,
    resolve_with_skopeo,
    write_lock,
)

SYSTEM = "cpu-2c-vllm"
IMAGE = "docker://registry.example/rocm/vllm@sha256:" + "1" * 64
TORCH = metadata.version("torch")


def lock_cli(configfile: Path, *extra: str) -> int:
    return main(["lock", "--configfile", str(configfile), "--offline", *extra])


def default_copy(tmp_path: Path) -> Path:
    configfile = tmp_path / "my.yaml"
    shutil.copyfile(DEFAULT_CONFIG, configfile)
    return configfile


def edit_lock(configfile: Path, edit) -> dict:
    """Change the written lock as another environment would have written it."""
    path = lock_path(configfile)
    lock = json.loads(path.read_text())
    edit(lock)
    path.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    return lock


def test_the_default_configs_lock_is_written_beside_it_and_deterministic(tmp_path, capsys):
    configfile = default_copy(tmp_path)
    assert lock_cli(configfile) == 0
    path = tmp_path / "my.lock.json"
    assert f"wrote {path}: 4 artifacts, 2 systems" in capsys.readouterr().out
    first = path.read_bytes()
    lock = json.loads(first)
    assert lock["format"] == LOCK_FORMAT and lock["config"] == "my.yaml"
    shipped = lock["artifacts"]["models"]["tiny-llama"]
    assert shipped["source"] == "file://artifacts/models/tiny-llama"
    assert shipped["checksums"] == "sha256_manifest artifacts/models/tiny-llama.sha256" and shipped["files"] == 6
    builtin = lock["artifacts"]["datasets"]["openorca-synthetic"]
    assert builtin["source"] == "builtin:openorca-synthetic" and len(builtin["builtin_sha256"]) == 64
    assert set(lock["artifacts"]["datasets"]) == {"openorca-synthetic", "vbench-prompts-synthetic"}
    assert lock["containers"] == {SYSTEM: None, "cpu-2c-diffusers": None}
    config = validate_config(load_yaml(DEFAULT_CONFIG), SCHEMA)
    assert lock["quantization"]["recipes"] == config["quantization"]
    assert lock["quantization"]["tools"]["torch"] == TORCH
    assert lock["loadgen"] == {
        "installed": metadata.version("mlcommons-loadgen"),
        "seeds": load_round("v6.0").seeds,
    }
    assert lock["packages"]["workflow"]["torch"] == TORCH and lock["packages"]["workflow"]["snakemake"]
    for env in ("quark", "vbench"):
        assert lock["packages"][env] == "absent" or isinstance(lock["packages"][env], dict)
    # Same inputs, same bytes: a second lock keeps the first one's `created`.
    assert lock_cli(configfile) == 0
    assert path.read_bytes() == first
    # A builtin parameter is part of the artifact's identity.
    changed = load_yaml(configfile)
    changed["datasets"]["openorca-synthetic"]["builtin"]["seed"] = 1
    configfile.write_text(yaml.safe_dump(changed))
    assert lock_cli(configfile) == 0
    relocked = json.loads(path.read_text())["artifacts"]["datasets"]["openorca-synthetic"]
    assert relocked["builtin_sha256"] != builtin["builtin_sha256"]


def test_created_is_the_only_timestamp(tmp_path, monkeypatch):
    configfile = default_copy(tmp_path)
    config = validate_config(load_yaml(configfile), SCHEMA)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764633600")
    path, _ = write_lock(configfile, config, resolve_image=None)
    first = path.read_bytes()
    path.unlink()
    write_lock(configfile, config, resolve_image=None)
    assert path.read_bytes() == first and json.loads(first)["created"] == "2025-12-02T00:00:00Z"


def file_artifacts(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A file:// model pinned by a sha256sum manifest and a file:// dataset by a sha256 map."""
    model = tmp_path / "published"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text('{"hidden_size": 64}\n')
    (model / "sub" / "model.safetensors").write_bytes(b"\0" * 100)
    manifest = tmp_path / "published.sha256"
    manifest.write_text(
        "".join(f"{sha256_file(model / name)}  {name}\n" for name in ("sub/model.safetensors", "config.json"))
    )
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.pkl").write_bytes(b"rows")
    datasets = {"source": f"file://{data}", "file": "rows.pkl", "sha256": {"rows.pkl": sha256_file(data / "rows.pkl")}}
    return model, manifest, datasets


def file_config(tmp_path: Path, default_config: dict) -> tuple[Path, Path]:
    model, manifest, dataset = file_artifacts(tmp_path)
    default_config["models"]["published"] = {"source": f"file://{model}", "sha256_manifest": str(manifest)}
    default_config["datasets"]["extra"] = dataset
    default_config["systems"][SYSTEM]["software"] = {"container": IMAGE}
    configfile = tmp_path / "pub.yaml"
    configfile.write_text(yaml.safe_dump(default_config))
    return configfile, model


def test_a_file_model_with_a_manifest_is_locked_by_its_checksums(tmp_path, default_config):
    configfile, model = file_config(tmp_path, default_config)
    assert lock_cli(configfile) == 0
    first = lock_path(configfile).read_bytes()
    lock = json.loads(first)
    published = lock["artifacts"]["models"]["published"]
    assert published["files"] == 2 and published["source"] == f"file://{model}"
    # The hash the acquire stage records for the verified folder (manifest.sha256's own hash).
    record = acquire(
        f"file://{model}", tmp_path / "acquired", manifest=tmp_path / "published.sha256", log=lambda m: None
    )
    assert published["manifest_sha256"] == record["manifest_sha256"]
    assert lock["artifacts"]["datasets"]["extra"]["files"] == 1
    assert lock["containers"][SYSTEM] == {
        "image": IMAGE,
        "digest": "sha256:" + "1" * 64,
        "resolved": "not resolved: offline",
    }
    assert lock_cli(configfile) == 0 and lock_path(configfile).read_bytes() == first
    # The same checksums as a JSON manifest: the same identity.
    hashes = {
        "config.json": sha256_file(model / "config.json"),
        "sub/model.safetensors": sha256_file(model / "sub/model.safetensors"),
    }
    (tmp_path / "published.sha256").write_text(json.dumps(hashes))
    config = validate_config(load_yaml(configfile), SCHEMA)
    assert resolve(config)["artifacts"]["models"]["published"]["manifest_sha256"] == published["manifest_sha256"]
    # A changed checksum is a difference, named.
    hashes["config.json"] = "0" * 64
    (tmp_path / "published.sha256").write_text(json.dumps(hashes))
    with pytest.raises(UserError, match=r"artifacts\.models\.published\.manifest_sha256: locked [0-9a-f]{64}, here"):
        check_environment(config, [configfile])


def test_container_digests_come_from_the_registry_where_skopeo_reaches_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert resolve_with_skopeo(IMAGE) == "not resolved: skopeo is not on PATH"
    assert resolve_with_skopeo("oras://registry.example/x@sha256:" + "1" * 64).startswith(
        "not resolved: skopeo reads docker://"
    )
    # A stand-in skopeo (no network in tests): the digest is the sha256 of the raw manifest it prints.
    skopeo = tmp_path / "skopeo"
    skopeo.write_text('#!/bin/sh\n[ "$2" = "--raw" ] && printf \'{"schemaVersion": 2}\'\n')
    skopeo.chmod(0o755)
    from mlperf_repro.hashing import sha256_bytes

    assert resolve_with_skopeo(IMAGE) == "sha256:" + sha256_bytes(b'{"schemaVersion": 2}')
    skopeo.write_text("#!/bin/sh\necho 'manifest unknown' >&2\nexit 1\n")
    assert resolve_with_skopeo(IMAGE) == "not resolved: skopeo: manifest unknown"


def test_a_changed_environment_stops_naming_each_difference(tmp_path):
    configfile = default_copy(tmp_path)
    assert lock_cli(configfile) == 0

    def elsewhere(lock):
        lock["packages"]["workflow"]["torch"] = "2.12.0"
        lock["quantization"]["tools"]["torch"] = "2.12.0"
        lock["loadgen"]["installed"] = "6.0.4"
        lock["artifacts"]["models"]["gone"] = {"source": "builtin:tiny-llama", "builtin_sha256": "0" * 64}
        lock["created"] = "1999-01-01T00:00:00Z"  # never compared

    edit_lock(configfile, elsewhere)
    config = validate_config(load_yaml(configfile), SCHEMA)
    with pytest.raises(UserError) as caught:
        check_environment(config, [configfile], log=lambda line: None)
    message = str(caught.value)
    for line in (
        f"packages.workflow.torch: locked 2.12.0, here {TORCH}",
        f"quantization.tools.torch: locked 2.12.0, here {TORCH}",
        f"loadgen.installed: locked 6.0.4, here {metadata.version('mlcommons-loadgen')}",
        'artifacts.models.gone: locked {"builtin_sha256":"'
        + "0" * 64
        + '","source":"builtin:tiny-llama"}, here absent',
    ):
        assert f"\n  {line}\n" in message + "\n"
    assert "in 4 place(s)" in message and "created" not in message
    assert f"mlperf-repro lock --configfile {configfile}" in message and 'lock_override="<reason>"' in message


def test_lock_differences_name_the_key_and_both_values():
    lock = {"created": "x", "packages": {"quark": "absent", "workflow": {"torch": "2.13.0", "numpy": "2.3.0"}}}
    current = {"created": "y", "packages": {"quark": {"amd-quark": "0.13"}, "workflow": {"torch": "2.12.0"}}}
    assert lock_differences(lock, current) == [
        'packages.quark: locked absent, here {"amd-quark":"0.13"}',
        "packages.workflow.numpy: locked 2.3.0, here absent",
        "packages.workflow.torch: locked 2.13.0, here 2.12.0",
    ]
    # The registry's answer is not compared: the check at the workflow's start asks no registry.
    image = {"containers": {"s": {"image": IMAGE, "digest": "d", "resolved": "sha256:abc"}}}
    assert lock_differences(image, {"containers": {"s": {"image": IMAGE, "digest": "d", "resolved": "x"}}}) == []


def test_the_override_passes_and_is_what_each_run_records(tmp_path):
    configfile = default_copy(tmp_path)
    assert lock_cli(configfile) == 0
    edit_lock(configfile, lambda lock: lock["packages"]["workflow"].update(torch="2.12.0"))
    config = validate_config(load_yaml(configfile), SCHEMA)
    config["lock_override"] = "torch 2.13 tested on this host"
    lines = []
    record = check_environment(config, [configfile], log=lines.append)
    difference = f"packages.workflow.torch: locked 2.12.0, here {TORCH}"
    assert record == {
        "file": "my.lock.json",
        "sha256": sha256_file(lock_path(configfile)),
        "override": "torch 2.13 tested on this host",
        "differences": [difference],
    }
    assert any("accepted (torch 2.13 tested on this host)" in line for line in lines)
    # The provenance record function, and the file the workflow's start writes and each run reads.
    assert provenance.lock_record(lock_path(configfile), "why", [difference]) == dict(record, override="why")
    check = tmp_path / "results/check/lock.json"
    assert provenance.read_lock_check(check) is None
    check.parent.mkdir(parents=True)
    check.write_text(json.dumps(record))
    assert provenance.read_lock_check(check) == record
    assert provenance.collect(lock=provenance.read_lock_check(check))["lock"] == record
    # Nothing differs: the run goes ahead and no override is recorded.
    assert lock_cli(configfile) == 0
    assert check_environment(config, [configfile], log=lines.append)["override"] is None
    # No lock: nothing checked, nothing recorded.
    lock_path(configfile).unlink()
    assert check_environment(config, [configfile], log=lines.append) is None


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("not json {", "is not a lock file (not JSON"),
        (
            json.dumps({"format": "mlperf-repro lock 0"}),
            "is a lock of format 'mlperf-repro lock 0', this version reads",
        ),
        ("[1, 2]", "is a lock of format None"),
    ],
)
def test_a_broken_lock_is_one_line(tmp_path, text, fragment):
    configfile = default_copy(tmp_path)
    lock_path(configfile).write_text(text)
    config = validate_config(load_yaml(configfile), SCHEMA)
    with pytest.raises(UserError) as caught:
        check_environment(config, [configfile])
    assert fragment in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(UserError):
        read_lock(lock_path(configfile))


def test_lock_of_a_config_whose_manifest_is_missing_is_one_line(tmp_path, default_config, capsys):
    configfile, _ = file_config(tmp_path, default_config)
    (tmp_path / "published.sha256").unlink()
    assert lock_cli(configfile) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read checksum manifest") and err.count("\n") == 1
    assert not lock_path(configfile).exists()


@pytest.mark.slow
def test_snakemake_refuses_a_differing_lock_and_runs_with_an_override(tmp_path):
    """Through Snakemake's command line: a dry run stops before any job, naming the
    difference; with lock_override the run goes ahead and its start records what it accepted."""
    work = make_workdir(tmp_path)
    configfile = default_copy(work)
    # As a user runs it: its own process, whose sys.path is the workflow's (the test process's may
    # hold other tests' distributions, which the workflow's processes would then lack).
    locked = subprocess.run(
        [sys.executable, "-m", "mlperf_repro", "lock", "--configfile", str(configfile), "--offline"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert locked.returncode == 0, locked.stderr
    edit_lock(configfile, lambda lock: lock["packages"]["workflow"].update(torch="2.12.0"))
    refused = run_snakemake(work, "-n", "--configfile", "my.yaml", timeout=300)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, output[-3000:]
    assert f"packages.workflow.torch: locked 2.12.0, here {TORCH}" in output
    assert "mlperf-repro lock --configfile" in output and "lock_override" in output
    assert "Traceback" not in output
    # The plan view is a real (cheap) run: the workflow's start writes the lock record.
    passed = run_snakemake(
        work, "-c1", "plan_view", "--configfile", "my.yaml", "--config", "lock_override=tested torch", timeout=300
    )
    assert passed.returncode == 0, (passed.stdout + passed.stderr)[-3000:]
    record = json.loads((work / "results/check/lock.json").read_text())
    assert record["override"] == "tested torch"
    assert record["differences"] == [f"packages.workflow.torch: locked 2.12.0, here {TORCH}"]
    assert record["sha256"] == sha256_file(work / "my.lock.json")


@pytest.mark.slow
def test_compare_lists_a_lock_override_as_a_cause(tmp_path):
    from tree_factory import PROVENANCE, build_tree, make_runs

    from mlperf_repro.compare.render import to_html, to_markdown
    from mlperf_repro.compare.report import compare_paths

    (tmp_path / "runs").mkdir()
    runs = make_runs(tmp_path / "runs")
    locked = {"file": "my.lock.json", "sha256": "c" * 64, "override": None, "differences": []}
    reference_provenance = copy.deepcopy(PROVENANCE)
    reference_provenance["performance"]["lock"] = locked
    partner_provenance = copy.deepcopy(PROVENANCE)
    accepted = ["packages.workflow.torch: locked 2.13.0, here 2.12.0"]
    partner_provenance["performance"]["lock"] = dict(locked, override="torch 2.12 & <tested>", differences=accepted)
    reference = build_tree(tmp_path / "vendor", runs, provenance=reference_provenance)
    partner = build_tree(tmp_path / "partner", runs, provenance=partner_provenance)
    (comparison,) = compare_paths(str(reference), [str(partner)])
    for row in comparison.rows:
        assert [(c.name, c.category) for c in row.causes] == [("lock override", "environment (lock)")]
        assert {key for key, _, _ in row.causes[0].evidence} == {"lock.override", "lock.differences"}
    markdown = to_markdown(comparison)
    assert (
        "> lock override: partner ran 3 result(s) (sys1/llama2-70b-99/Interactive, sys1/llama2-70b-99/Offline, "
        'sys1/llama2-70b-99/Server) with a lock override: "torch 2.12 & <tested>". Accepted differences from the '
        "lock: packages.workflow.torch: locked 2.13.0, here 2.12.0." in markdown
    )
    assert "**lock override** (environment: environment (lock))" in markdown
    assert "lock override:</b> partner ran 3 result(s)" in to_html(comparison)
    assert "torch 2.12 &amp; &lt;tested&gt;" in to_html(comparison)
