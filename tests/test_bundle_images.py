"""A bundle's container images: real OCI archives copied by skopeo from a real registry (the
distribution registry, Debian's docker-registry, run here on a free loopback port), their
digests kept, and a run given the bundle running them from it.

The images are built here (a layer tar, a config, a manifest), in three shapes a config can pin:
an OCI manifest, a Docker schema 2 manifest (most of Docker Hub; skopeo would convert it to
OCI, changing its digest, without --preserve-digests) and a multi-platform index. The registry
speaks plain http on the loopback, which skopeo refuses unless the registries.conf marks it
insecure: the test does what a site with its own http mirror does (CONTAINERS_REGISTRIES_CONF).
The registry tests skip, saying why, where skopeo or the registry binary is missing
(./install.sh --test installs both with apt). The resolution tests (Plan.container with a
bundle) need neither."""

from __future__ import annotations

import copy
import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import SCHEMA

from mlperf_repro.bundle import MANIFEST, bundled_image
from mlperf_repro.bundle.build import _images, build_bundle, site_needs, verify_bundle
from mlperf_repro.bundle.wheels import Target
from mlperf_repro.config import validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.hashing import sha256_file
from mlperf_repro.plan import Plan

SKOPEO = shutil.which("skopeo")
REGISTRY = shutil.which("docker-registry") or shutil.which("registry")
needs_registry = pytest.mark.skipif(
    SKOPEO is None or REGISTRY is None,
    reason="skopeo or the distribution registry (docker-registry) is not installed: "
    "apt-get install skopeo docker-registry (./install.sh --test does)",
)
SYSTEM = "cpu-2c-vllm"
SHAPES = {"oci": "an OCI manifest", "docker": "a Docker schema 2 manifest", "index": "a two-platform index"}
MEDIA = {
    "oci": (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.config.v1+json",
        "application/vnd.oci.image.layer.v1.tar+gzip",
    ),
    "docker": (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.container.image.v1+json",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
    ),
}
INDEX = "application/vnd.oci.image.index.v1+json"


def _blob(blobs: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _image(blobs: Path, media: tuple[str, str, str], arch: str, text: str) -> dict:
    """One image's blobs (a gzipped layer holding ``hello.txt``, its config) and its manifest's
    descriptor."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        body = text.encode()
        info = tarfile.TarInfo("hello.txt")
        info.size, info.mtime = len(body), 0
        tar.addfile(info, io.BytesIO(body))
    layer = _blob(blobs, gzip.compress(raw.getvalue(), mtime=0))
    config = _blob(
        blobs,
        json.dumps(
            {
                "architecture": arch,
                "os": "linux",
                "config": {},
                "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()]},
            }
        ).encode(),
    )
    manifest = {
        "schemaVersion": 2,
        "mediaType": media[0],
        "config": {"mediaType": media[1], **config},
        "layers": [{"mediaType": media[2], **layer}],
    }
    return {"mediaType": media[0], **_blob(blobs, json.dumps(manifest).encode())}


def build_image(folder: Path, shape: str) -> tuple[str, str]:
    """An image of ``shape`` written as skopeo reads it: an OCI layout (``oci:DIR:v1``), or for
    a Docker schema 2 manifest, which an OCI layout's index does not list, skopeo's ``dir:``
    layout. Returns (skopeo source, the top manifest's digest)."""
    blobs = folder / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    if shape == "index":
        images = [
            {
                **_image(blobs, MEDIA["oci"], arch, f"hello from {arch}\n"),
                "platform": {"architecture": arch, "os": "linux"},
            }
            for arch in ("amd64", "arm64")
        ]
        top = {"mediaType": INDEX, **_blob(blobs, json.dumps({"schemaVersion": 2, "manifests": images}).encode())}
    else:
        top = _image(blobs, MEDIA[shape], "amd64", f"hello from {shape}\n")
    if shape == "docker":
        for blob in blobs.iterdir():
            blob.rename(folder / blob.name)
        shutil.rmtree(folder / "blobs")
        (folder / top["digest"][len("sha256:") :]).rename(folder / "manifest.json")
        (folder / "version").write_text("Directory Transport Version: 1.1\n")
        return f"dir:{folder}", top["digest"]
    (folder / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    ref = {**top, "annotations": {"org.opencontainers.image.ref.name": "v1"}}
    (folder / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [ref]}))
    return f"oci:{folder}:v1", top["digest"]


def skopeo(*args: str) -> subprocess.CompletedProcess:
    conf = os.environ.get("CONTAINERS_REGISTRIES_CONF")
    done = subprocess.run(
        [SKOPEO, *(["--registries-conf", conf] if conf else []), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"skopeo {' '.join(args)}: {done.stderr}"
    return done


def raw_digest(reference: str) -> str:
    """The digest of the top manifest ``reference`` serves (skopeo inspect --raw, hashed)."""
    return "sha256:" + hashlib.sha256(skopeo("inspect", "--raw", reference).stdout.encode()).hexdigest()


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A distribution registry on a free loopback port (filesystem storage in a temporary
    folder), with a registries.conf that marks it insecure (plain http) in
    CONTAINERS_REGISTRIES_CONF; stopped when the module's tests are done."""
    folder = tmp_path_factory.mktemp("registry")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    host = f"127.0.0.1:{port}"
    (folder / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: error\n"
        f"storage:\n  filesystem:\n    rootdirectory: {folder / 'storage'}\n"
        f"http:\n  addr: {host}\n"
    )
    (folder / "registries.conf").write_text(f'[[registry]]\nlocation = "{host}"\ninsecure = true\n')
    log = open(folder / "registry.log", "w")
    process = subprocess.Popen([REGISTRY, "serve", str(folder / "config.yml")], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://{host}/v2/", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the registry did not start: {(folder / 'registry.log').read_text()}") from None
                time.sleep(0.1)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("CONTAINERS_REGISTRIES_CONF", str(folder / "registries.conf"))
            yield host
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _with_images(default_config: dict, images: dict[str, str]) -> dict:
    """The default config with one system per image (copies of its system)."""
    config = copy.deepcopy(default_config)
    template = config["systems"].pop(SYSTEM)
    for system, image in images.items():
        config["systems"][system] = {**copy.deepcopy(template), "software": {"container": image}}
    return config


@pytest.fixture(scope="module")
def pushed(registry, tmp_path_factory) -> dict[str, str]:
    """Each shape built here and pushed to the registry by skopeo: {shape: docker://...@digest}."""
    images = {}
    for shape in SHAPES:
        source, digest = build_image(tmp_path_factory.mktemp(f"image-{shape}"), shape)
        skopeo("copy", "--all", "--preserve-digests", source, f"docker://{registry}/tiny/{shape}:v1")
        # The registry's digest is the manifest built here: nothing was converted on the way.
        assert raw_digest(f"docker://{registry}/tiny/{shape}:v1") == digest
        images[shape] = f"docker://{registry}/tiny/{shape}@{digest}"
    return images


@pytest.fixture(scope="module")
def built(pushed, tmp_path_factory):
    from conftest import DEFAULT_CONFIG, REPO, llama2_part

    from mlperf_repro.config import load_yaml

    config = _with_images(llama2_part(load_yaml(DEFAULT_CONFIG)), pushed)
    root = tmp_path_factory.mktemp("bundles")
    configfile = root / "my.yaml"
    configfile.write_text(json.dumps(config))
    lines: list[str] = []
    # No wheels (the lock names no environment) and no artifacts: this bundle is about images.
    manifest = build_bundle(
        {**config, "models": {}, "datasets": {}},
        configfile,
        root / "bundle",
        lock={"format": "test", "packages": {}},
        progress=lines.append,
        workdir=REPO,
    )
    return config, configfile, root / "bundle", manifest, lines


@needs_registry
def test_each_image_is_an_oci_archive_with_the_registry_s_digest(pushed, built):
    _, _, root, manifest, lines = built
    for shape, image in pushed.items():
        rel = f"images/{shape}.oci.tar"
        digest = image.rsplit("@", 1)[1]
        assert manifest["parts"][f"images/{shape}"] == {"status": "done", "image": image, "digest": digest}, shape
        assert manifest["files"][rel] == {
            "sha256": sha256_file(root / rel),
            "bytes": (root / rel).stat().st_size,
            "part": f"images/{shape}",
        }
        # skopeo reads the archive as the same image the registry serves, by digest.
        assert raw_digest(f"oci-archive:{root / rel}") == digest, SHAPES[shape]
        if shape != "index":
            assert skopeo("inspect", "--format", "{{.Digest}}", f"oci-archive:{root / rel}").stdout.strip() == digest
    # Both platforms of the index are in its archive, not only this machine's.
    with tarfile.open(root / "images/index.oci.tar") as tar:
        index_digest = pushed["index"].rsplit(":", 1)[1]
        index = json.loads(tar.extractfile(f"blobs/sha256/{index_digest}").read())
        assert {m["platform"]["architecture"] for m in index["manifests"]} == {"amd64", "arm64"}
        assert all(f"blobs/sha256/{m['digest'][7:]}" in tar.getnames() for m in index["manifests"])
    assert not list(root.glob("images/*.partial"))
    assert any("images/oci: docker://" in line for line in lines)


@needs_registry
def test_verify_passes_and_names_a_damaged_archive(built, tmp_path):
    _, _, root, _, _ = built
    _, problems = verify_bundle(root)
    assert problems == []
    # The standard-library check install.sh --from-bundle runs agrees.
    import sys

    from conftest import REPO

    check = subprocess.run(
        [sys.executable, "-m", "mlperf_repro.bundle", str(root)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")},
    )
    assert check.returncode == 0, check.stderr
    copy_root = shutil.copytree(root, tmp_path / "copy")
    archive = copy_root / "images/docker.oci.tar"
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    _, problems = verify_bundle(copy_root)
    assert problems == ["images/docker.oci.tar: its sha256 differs from the bundle's manifest (damaged or changed)"]
    check = subprocess.run(
        [sys.executable, "-m", "mlperf_repro.bundle", str(copy_root)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")},
    )
    assert check.returncode == 1 and "images/docker.oci.tar: its sha256 differs" in check.stderr


@needs_registry
def test_running_again_keeps_the_archives_and_a_changed_image_is_copied_again(built, pushed, tmp_path):
    config, configfile, root, manifest, _ = built
    work = shutil.copytree(root, tmp_path / "again")
    lines: list[str] = []
    again = build_bundle(
        {**config, "models": {}, "datasets": {}},
        configfile,
        work,
        lock={"format": "test", "packages": {}},
        progress=lines.append,
    )
    assert all(f"bundle: images/{shape}: complete, kept" in lines for shape in SHAPES)
    assert {k: v for k, v in again["files"].items() if k.startswith("images/")} == {
        k: v for k, v in manifest["files"].items() if k.startswith("images/")
    }
    # The config now pins the docker image for the oci system: that archive is replaced.
    changed = copy.deepcopy(config)
    changed["systems"]["oci"]["software"]["container"] = pushed["docker"]
    lines.clear()
    again = build_bundle(
        {**changed, "models": {}, "datasets": {}},
        configfile,
        work,
        lock={"format": "test", "packages": {}},
        progress=lines.append,
    )
    assert f"bundle: images/oci: {pushed['docker']}" in lines
    assert again["parts"]["images/oci"]["image"] == pushed["docker"]
    assert again["files"]["images/oci.oci.tar"]["sha256"] == sha256_file(work / "images/oci.oci.tar")
    assert raw_digest(f"oci-archive:{work / 'images/oci.oci.tar'}") == pushed["docker"].rsplit("@", 1)[1]
    assert verify_bundle(work)[1] == []


@needs_registry
def test_the_run_uses_the_archive_and_records_the_configured_image(built, pushed, default_config, monkeypatch):
    _, _, root, _, _ = built
    config = validate_config(_with_images(default_config, pushed), SCHEMA)
    monkeypatch.delenv("MLPERF_REPRO_BUNDLE", raising=False)
    plan = Plan(config)
    assert plan.container("oci") == pushed["oci"]  # no bundle: apptainer pulls the reference
    monkeypatch.setenv("MLPERF_REPRO_BUNDLE", str(root))
    plan = Plan(config)
    for shape, image in pushed.items():
        assert plan.container(shape) == f"oci-archive:{(root / f'images/{shape}.oci.tar').resolve()}"
        assert plan.container_image(shape) == image  # what provenance records: the configured digest
    assert plan.quantize_container("tiny-llama", "mxfp4-w4a16") == plan.container(next(iter(config["systems"])))
    assert (
        plan.quantize_image("tiny-llama", "mxfp4-w4a16")
        == config["systems"][next(iter(config["systems"]))]["software"]["container"]
    )


@needs_registry
def test_the_site_registry_command_keeps_the_digest(built, pushed, registry):
    """What docs/offline.md and --verify tell a launch: kubernetes site to run, run: the archive
    loaded into another registry (here the same one, under another name) is served there with
    the configured digest, the one the kubernetes.image setting pins."""
    root = built[2]
    for shape, image in pushed.items():
        digest = image.rsplit("@", 1)[1]
        skopeo(
            "copy",
            "--all",
            "--preserve-digests",
            f"oci-archive:{root / f'images/{shape}.oci.tar'}",
            f"docker://{registry}/site/{shape}:bundle",
        )
        assert raw_digest(f"docker://{registry}/site/{shape}@{digest}") == digest


def _bundle_with(root: Path, parts: dict, files: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    manifest = {"format": "mlperf-repro bundle 1", "files": files or {}, "parts": parts}
    (root / MANIFEST).write_text(json.dumps(manifest))
    return root


IMAGE = "docker://registry.example/vllm/vllm-openai@sha256:" + hashlib.sha256(b"an image").hexdigest()


def test_a_bundle_s_image_part_resolves_to_its_archive_or_stops_clearly(tmp_path, default_config, monkeypatch):
    config = validate_config(_with_images(default_config, {"gpu": IMAGE}), SCHEMA)
    archive_bytes = b"an archive"
    root = _bundle_with(tmp_path / "done", {"images/gpu": {"status": "done", "image": IMAGE}})
    (root / "images").mkdir()
    (root / "images/gpu.oci.tar").write_bytes(archive_bytes)
    monkeypatch.setenv("MLPERF_REPRO_BUNDLE", str(root))
    assert Plan(config).container("gpu") == f"oci-archive:{(root / 'images/gpu.oci.tar').resolve()}"
    assert Plan(config).container_image("gpu") == IMAGE
    # The config key wins over the environment, as for the artifacts.
    missing = _bundle_with(
        tmp_path / "missing",
        {
            "images/gpu": {
                "status": "missing",
                "what": f"{IMAGE} (skopeo is not installed)",
                "command": "skopeo copy --all --preserve-digests docker://... oci-archive:...",
            }
        },
    )
    with pytest.raises(UserError) as err:
        Plan({**config, "bundle": str(missing)}).container("gpu")
    message = str(err.value)
    assert f"not in the bundle {missing} (part images/gpu)" in message
    assert "skopeo is not installed); complete it with: skopeo copy --all --preserve-digests" in message
    # An archive of another image, a part the bundle lacks, an archive gone: each named.
    other = _bundle_with(tmp_path / "other", {"images/gpu": {"status": "done", "image": IMAGE[:-1] + "0"}})
    with pytest.raises(UserError, match=r"images/gpu\): it holds .*0, the config names"):
        Plan({**config, "bundle": str(other)}).container("gpu")
    with pytest.raises(UserError, match=r"images/gpu\): the bundle has no such part"):
        Plan({**config, "bundle": str(_bundle_with(tmp_path / "none", {}))}).container("gpu")
    (root / "images/gpu.oci.tar").unlink()
    with pytest.raises(UserError, match=r"images/gpu\): .*gpu.oci.tar is missing"):
        Plan(config).container("gpu")
    # A path Snakemake and apptainer cannot take in an oci-archive: reference.
    spaced = _bundle_with(tmp_path / "a bundle", {"images/gpu": {"status": "done", "image": IMAGE}})
    (spaced / "images").mkdir()
    (spaced / "images/gpu.oci.tar").write_bytes(archive_bytes)
    with pytest.raises(UserError, match="has a space or ':'"):
        bundled_image("gpu", IMAGE, spaced)


def test_snakemake_pulls_an_oci_archive_reference_and_would_exec_a_plain_path():
    """Why the bundle's image is given as ``oci-archive:/path``: Snakemake's apptainer support
    takes a value with a scheme as an image to ``apptainer pull`` (which converts an OCI archive
    locally) and a plain path as a ready image file for ``apptainer exec`` (an OCI tar is not)."""
    from snakemake.common import is_local_file

    assert not is_local_file("oci-archive:/site/bundle/images/gpu.oci.tar")
    assert not is_local_file(IMAGE)
    assert is_local_file("/site/bundle/images/gpu.oci.tar")


def test_a_kubernetes_system_s_image_is_loaded_into_the_site_s_registry(default_config):
    """Server pods cannot read the bundle: what a site needs names the exact skopeo command and
    the setting that points the pods at the loaded copy, by the same digest; the head job runs
    in the workflow's pod image, so no archive is resolved for it."""
    config = _with_images(default_config, {"k8s": IMAGE, "gpu": IMAGE})
    config["systems"]["k8s"]["engine"]["endpoints"] = {"launch": "kubernetes"}
    needs = site_needs(config, Target("3.11", ("manylinux_2_28_x86_64",)))
    (line,) = [n for n in needs if "kubernetes)" in n]
    digest = IMAGE.rsplit("@", 1)[1]
    assert (
        "`skopeo copy --all --preserve-digests oci-archive:images/k8s.oci.tar "
        "docker://SITE_REGISTRY/vllm/vllm-openai:bundle`" in line
    )
    assert f"systems.k8s.engine.endpoints.kubernetes.image: docker://SITE_REGISTRY/vllm/vllm-openai@{digest}" in line
    assert not any("systems.gpu" in n for n in needs)


def test_without_skopeo_an_image_is_listed_with_its_copy_command(tmp_path, default_config, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no skopeo on it
    monkeypatch.delenv("CONTAINERS_REGISTRIES_CONF", raising=False)
    config = _with_images(default_config, {"gpu": IMAGE, "tagless": "docker://x/y@sha256:TODO: the digest"})
    manifest = {"files": {}, "parts": {}}
    _images(config, tmp_path, manifest, lambda line: None)
    assert manifest["parts"]["images/gpu"] == {
        "status": "missing",
        "what": f"{IMAGE} (skopeo is not installed)",
        "command": f"skopeo copy --all --preserve-digests {IMAGE} oci-archive:{tmp_path}/images/gpu.oci.tar",
    }
    assert "placeholder" in manifest["parts"]["images/tagless"]["what"]
    assert not (tmp_path / "images").exists()


# A dry run of the workflow under apptainer deployment, in this Python (the cluster preview's
# planner): every job Snakemake plans, with the image it gives apptainer and the image the job
# records. apptainer is not installed here, so Snakemake's check of its version is skipped.
DRY_RUN = """
import json, sys
from mlperf_repro.cluster.preview_child import jobs_of_dry_run

jobs = jobs_of_dry_run(sys.argv[2:], submit_host=False)
seen = [
    {"rule": j.rule.name, "container": j.container_img_url, "image": getattr(j.params, "container_image", None)}
    for j in jobs
]
open(sys.argv[1], "w").write(json.dumps(seen))
"""


def test_a_dry_run_given_the_bundle_runs_the_archive_and_records_the_reference(tmp_path, default_config):
    """The workflow's wiring: with a bundle, Snakemake's ``container:`` of the image rules is
    the archive (which it plans to ``apptainer pull``), while the jobs' ``container_image``
    param, which provenance records, stays the configured reference."""
    import sys

    import yaml
    from conftest import SNAKEMAKE, make_workdir

    work = make_workdir(tmp_path)
    bundle = _bundle_with(tmp_path / "bundle", {f"images/{SYSTEM}": {"status": "done", "image": IMAGE}})
    (bundle / "images").mkdir()
    (bundle / f"images/{SYSTEM}.oci.tar").write_bytes(b"an archive")
    for model in default_config["models"]:  # the artifacts' part: folders the dry run names
        (bundle / "artifacts/models" / model).mkdir(parents=True)
    config = copy.deepcopy(default_config)
    config["systems"][SYSTEM]["software"] = {"container": IMAGE}
    config["bundle"] = str(bundle)
    (work / "my.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "jobs.json"
    assert SNAKEMAKE[1:] == ["-m", "snakemake"]
    done = subprocess.run(
        [sys.executable, "-c", DRY_RUN, str(out)]
        + ["--directory", str(work), "--snakefile", str(work / "Snakefile"), "--configfile", "my.yaml"]
        + ["--cores", "2", "--software-deployment-method", "apptainer"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    archive = f"oci-archive:{(bundle / f'images/{SYSTEM}.oci.tar').resolve()}"
    assert f"Singularity image {archive} will be pulled." in done.stdout + done.stderr
    jobs = json.loads(out.read_text())
    runs = [j for j in jobs if j["rule"] == "loadgen_run"]
    assert runs and all(j["container"] == archive and j["image"] == IMAGE for j in runs)
    assert {j["container"] for j in jobs} <= {archive, None}
