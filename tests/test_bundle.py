"""Offline bundles (mlperf_repro.bundle): built from a config on a connected machine, verified file
by file, completed where interrupted, and the workflow's acquisition served from one; a damaged
or incomplete bundle is one clear message naming the file. The wheels come from the package index
pip is configured with (a few small pure-Python pins here); artifacts from local folders."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlperf_repro.bundle import MANIFEST, bundled_entry
from mlperf_repro.bundle.build import build_bundle, verify_bundle
from mlperf_repro.errors import UserError
from mlperf_repro.fetch.entries import acquire_model_entry
from mlperf_repro.hashing import sha256_file
from mlperf_repro.lock import installed_packages

# Two small pure-Python packages of this environment, pinned as installed.
PINS = {name: installed_packages()[name] for name in ("idna", "six") if name in installed_packages()}


@pytest.fixture(scope="module")
def model_source(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hub") / "tiny-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}\n')
    (folder / "weights.bin").write_bytes(bytes(range(256)) * 64)
    return folder


def _config(default_config: dict, model_source: Path) -> dict:
    config = copy.deepcopy(default_config)
    model = next(iter(config["models"]))
    config["models"][model] = {
        "source": f"file://{model_source}",
        "sha256": {p.name: sha256_file(p) for p in sorted(model_source.iterdir())},
    }
    config["models"]["unpinned"] = {
        "source": "hf://org/model@TODO:the-40-hex-commit-you-verified",
        "sha256_manifest": "TODO: a manifest",
    }
    return config


@pytest.fixture(scope="module")
def built(tmp_path_factory, model_source):
    from conftest import DEFAULT_CONFIG, llama2_part

    from mlperf_repro.config import load_yaml

    config = _config(llama2_part(load_yaml(DEFAULT_CONFIG)), model_source)
    root = tmp_path_factory.mktemp("bundles")
    configfile = root / "my.yaml"
    configfile.write_text(json.dumps(config))
    lock = {"format": "test", "packages": {"workflow": PINS}}
    lines: list[str] = []
    manifest = build_bundle(config, configfile, root / "bundle", lock=lock, progress=lines.append)
    return config, configfile, root / "bundle", manifest, lines


def test_a_bundle_carries_the_lock_the_wheels_the_project_and_the_artifacts(built):
    config, _, root, manifest, lines = built
    assert manifest["format"] == "mlperf-repro bundle 1" and (root / "lock.json").is_file()
    wheels = sorted(p.name for p in (root / "wheels/workflow").glob("*.whl"))
    assert len(wheels) == len(PINS) and all(f"-{v}-" in " ".join(wheels) for v in PINS.values())
    assert [p.name for p in (root / "wheels/project").glob("*.whl")][0].startswith("mlperf_repro-")
    model = next(iter(config["models"]))
    assert (root / "artifacts/models" / model / "weights.bin").is_file()
    parts = manifest["parts"]
    assert parts[f"artifacts/models/{model}"]["status"] == "done"
    assert parts["artifacts/datasets/openorca-synthetic"]["status"] == "built"
    # What cannot be fetched here is listed with what completes it.
    assert parts["artifacts/models/unpinned"]["status"] == "missing"
    assert "TODO" in parts["artifacts/models/unpinned"]["what"]
    assert manifest["bytes"] == sum(f["bytes"] for f in manifest["files"].values())
    assert any("wheels/workflow" in line for line in lines)


def test_verify_names_every_damaged_or_missing_file(built, tmp_path):
    _, _, root, _, _ = built
    _, problems = verify_bundle(root)
    assert [p for p in problems if "unpinned" not in p] == []
    copy_root = shutil.copytree(root, tmp_path / "copy")
    wheel = next((copy_root / "wheels/workflow").glob("*.whl"))
    with open(wheel, "r+b") as handle:
        handle.seek(10)
        handle.write(b"\0")
    weights = next((copy_root / "artifacts/models").glob("*/weights.bin"))
    weights.unlink()
    _, problems = verify_bundle(copy_root)
    named = "\n".join(problems)
    assert f"wheels/workflow/{wheel.name}: its sha256 differs" in named
    assert f"{weights.relative_to(copy_root).as_posix()}: missing from the bundle" in named


def test_running_again_keeps_what_is_complete(built):
    config, configfile, root, manifest, _ = built
    lines: list[str] = []
    again = build_bundle(
        config, configfile, root, lock=json.loads((root / "lock.json").read_text()), progress=lines.append
    )
    assert any("wheels/workflow: complete, kept" in line for line in lines)
    assert {k: v["sha256"] for k, v in again["files"].items() if "project" not in k} == {
        k: v["sha256"] for k, v in manifest["files"].items() if "project" not in k
    }


def test_the_workflow_acquires_from_the_bundle_and_records_the_source(built, tmp_path):
    config, _, root, _, _ = built
    model = next(iter(config["models"]))
    entry = bundled_entry("models", model, config["models"][model], root)
    assert entry["source"].startswith("file://") and entry["bundled_from"] == config["models"][model]["source"]
    record = acquire_model_entry(entry, tmp_path / "model", tmp_path / "record.json")
    assert record["source"] == config["models"][model]["source"] and record["status"] == "verified"
    assert json.loads((tmp_path / "model" / "ACQUIRED.json").read_text())["bundle"] == entry["source"]
    # builtin sources are built as always; an entry the bundle lacks is named with the bundle.
    dataset = config["datasets"]["openorca-synthetic"]
    assert bundled_entry("datasets", "openorca-synthetic", dataset, root) == dataset
    with pytest.raises(UserError, match=r"models.unpinned .* is not in the bundle .*mlperf-repro bundle"):
        bundled_entry("models", "unpinned", config["models"]["unpinned"], root)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        st.binary(max_size=64),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
            max_leaves=10,
        ).map(lambda v: json.dumps(v).encode()),
        st.builds(
            lambda files: json.dumps({"format": "mlperf-repro bundle 1", "files": files, "parts": {}}).encode(),
            st.dictionaries(
                st.text(max_size=8),
                st.fixed_dictionaries(
                    {"sha256": st.text(max_size=8), "bytes": st.integers(0, 9), "part": st.text(max_size=4)}
                ),
                max_size=3,
            ),
        ),
    )
)
def test_any_manifest_is_read_or_refused_clearly(tmp_path_factory, content):
    root = tmp_path_factory.mktemp("any")
    (root / MANIFEST).write_bytes(content)
    try:
        _, problems = verify_bundle(root)
    except UserError as exc:
        assert MANIFEST in str(exc) or "bundle" in str(exc)
    else:
        assert all(isinstance(p, str) and p for p in problems)


def test_the_bundle_size_is_known_before_it_is_built(tmp_path, default_config, model_source):
    """The plan view's figure: each pin's file as pip would take it for the target (the best
    tag; a source archive where no wheel fits), from a find-links folder and a file:// simple
    index; a pin nobody holds is named, not guessed; file:// artifacts by their files."""
    from mlperf_repro.bundle.size import estimate_bundle
    from mlperf_repro.bundle.wheels import Target

    links = tmp_path / "links"
    links.mkdir()
    files = {
        "alpha-1.0-cp311-cp311-manylinux_2_28_x86_64.whl": 5000,  # pip's choice over the universal one
        "alpha-1.0-py3-none-any.whl": 700,
        "alpha-0.9-py3-none-any.whl": 100,  # another version
        "beta_pkg-2.0.tar.gz": 300,  # no wheel: the source archive
        "gamma-3.0-cp312-cp312-manylinux_2_28_x86_64.whl": 999,  # another Python: no file fits
    }
    for name, size in files.items():
        (links / name).write_bytes(b"x" * size)
    index = tmp_path / "simple"
    (index / "delta").mkdir(parents=True)
    (tmp_path / "files").mkdir()
    (tmp_path / "files/delta-4.0-py3-none-any.whl").write_bytes(b"y" * 123)
    (index / "delta/index.html").write_text('<a href="../../files/delta-4.0-py3-none-any.whl#sha256=00">delta</a>')
    config = _config(default_config, model_source)
    pins = {"alpha": "1.0", "beta-pkg": "2.0", "gamma": "3.0", "delta": "4.0"}
    size = estimate_bundle(
        config,
        target=Target("3.11", ("manylinux_2_28_x86_64",)),
        environments={"workflow": pins},
        sources=([links], [index]),
        remote_index=None,
    )
    from mlperf_repro.bundle.size import _project_bytes

    assert size.wheels == 5000 + 300 + 123 + _project_bytes()
    assert size.packages == 4 and "gamma==3.0" in size.unknown and "models.unpinned" in size.unknown
    assert size.artifacts == sum(p.stat().st_size for p in model_source.iterdir())
    from mlperf_repro.estimate import bundle_note

    assert "about" in bundle_note(size) and "gamma==3.0" in bundle_note(size)


def test_an_imported_example_with_todo_values_is_locked_without_them(tmp_path):
    """The bundle of a config still holding TODO: checksums (an imported example) locks what is
    known; the TODO: entries are listed as missing, not a crash reading a manifest 'TODO: ...'."""
    from conftest import REPO

    from mlperf_repro.bundle.build import lock_config
    from mlperf_repro.config import load_yaml
    from mlperf_repro.lock import resolve

    config = load_yaml(REPO / "config/examples/mi355x-llama2-70b.yaml")
    kept = lock_config(config)
    assert not any("TODO:" in json.dumps(e) for kind in ("models", "datasets") for e in kept[kind].values())
    locked = resolve(kept, workdir=REPO)
    assert set(locked["artifacts"]["models"]) == set(kept["models"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(
        st.tuples(
            st.one_of(
                st.text(max_size=30),
                st.builds(
                    lambda v, tag: f"alpha-{v}-{tag}.whl",
                    st.sampled_from(["1.0", "1.0.0", "1!1.0", "x", ""]),
                    st.sampled_from(["py3-none-any", "cp311-cp311-manylinux_2_28_x86_64", "cp312-abi3-win32", "?"]),
                ),
                st.builds(
                    lambda v, ext: f"alpha-{v}{ext}",
                    st.sampled_from(["1.0", "bad"]),
                    st.sampled_from([".tar.gz", ".zip", ""]),
                ),
            ),
            st.integers(0, 10**9),
        ),
        max_size=8,
    ),
    html=st.text(max_size=200),
)
def test_any_index_listing_gives_a_listed_size_or_none(tmp_path_factory, files, html):
    """What an index lists (any file names, a page with any hrefs) gives the size of one of the
    listed files or no size, never an exception."""
    from mlperf_repro.bundle.size import _Sources
    from mlperf_repro.bundle.wheels import Target

    index = tmp_path_factory.mktemp("simple")
    (index / "alpha").mkdir()
    (index / "alpha/index.html").write_text(html)
    sources = _Sources([], [index], Target("3.11", ("manylinux_2_28_x86_64",)))
    assert sources.candidates("alpha") is not None
    found = sources.pick("alpha", "1.0", files)
    assert found is None or found in {size for _, size in files}
