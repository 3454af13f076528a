"""Acquire stage: file://, https:// and hf:// sources against real loopback servers."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fetch_servers import HubStandIn, LoopbackServer, self_signed_tls, static_files

from mlperf_repro.errors import UserError
from mlperf_repro.fetch import MANIFEST_NAME, RECORD_NAME, acquire, read_manifest, verify_dir
from mlperf_repro.hashing import sha256_bytes
from mlperf_repro.progress import format_bytes

PAYLOAD = {"config.json": b'{"layers": 2}\n', "weights/part 1.bin": b"\x01" * 4096, "weights/part2.bin": b"\x02" * 100}
SHA = {path: sha256_bytes(body) for path, body in PAYLOAD.items()}


def write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(body)
    return root


def all_bytes_under(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in root.rglob("*") if p.is_file()]


def assert_acquired(dest: Path, files: dict[str, bytes]) -> None:
    for rel, body in files.items():
        assert (dest / rel).read_bytes() == body
    lines = (dest / MANIFEST_NAME).read_text().splitlines()
    assert lines == [f"{sha256_bytes(files[p])}  {p}" for p in sorted(files)]
    assert not [p for p in dest.rglob(".*")], "no dotfiles/dotfolders in an acquired dir"
    assert not list(dest.parent.glob("*.staging-*")), "staging dir must be cleaned up"
    verify_dir(dest)


@pytest.fixture
def src_dir(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "src", PAYLOAD)


# --------------------------------------------------------------------------- file://


def test_file_directory_copy_is_verified_and_independent(src_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "data" / "model"
    logs: list[str] = []
    record = acquire(f"file://{src_dir}", dest, sha256=SHA, log=logs.append)

    assert_acquired(dest, PAYLOAD)
    assert record["status"] == "verified"
    assert record["source"] == f"file://{src_dir}"
    assert record["files"] == [{"path": p, "sha256": SHA[p], "size": len(PAYLOAD[p])} for p in sorted(PAYLOAD)]
    assert json.loads((dest / RECORD_NAME).read_text()) == record
    # A real copy: damaging the acquired file leaves the source intact.
    (dest / "config.json").write_bytes(b"oops")
    assert (src_dir / "config.json").read_bytes() == PAYLOAD["config.json"]


def test_file_checksum_mismatch_quarantines_and_does_not_publish(src_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "data" / "model"
    wrong = dict(SHA, **{"weights/part2.bin": "0" * 64})
    with pytest.raises(UserError) as err:
        acquire(f"file://{src_dir}", dest, sha256=wrong, log=lambda _: None)
    msg = str(err.value)
    bad = tmp_path / "data" / "quarantine" / "model" / "weights" / "part2.bin"
    assert "'weights/part2.bin'" in msg and "0" * 64 in msg and SHA["weights/part2.bin"] in msg
    assert str(bad) in msg and "fix the sha256 map / manifest" in msg
    assert bad.read_bytes() == PAYLOAD["weights/part2.bin"]
    assert not dest.exists()
    assert not list(dest.parent.glob("*.staging-*"))


def test_file_missing_and_extra_files_are_errors(src_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"missing file 'weights/part3.bin'"):
        acquire(f"file://{src_dir}", tmp_path / "a", sha256=dict(SHA, **{"weights/part3.bin": "1" * 64}), log=print)
    (src_dir / "notes.txt").write_text("stray")
    with pytest.raises(UserError, match=r"unexpected file.*'notes.txt'"):
        acquire(f"file://{src_dir}", tmp_path / "b", sha256=SHA, log=print)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_missing_source_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        acquire(f"file://{tmp_path}/nowhere", tmp_path / "d", sha256=SHA, log=print)


def test_no_checksums_refused_unless_unverified_allowed(src_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "d"
    with pytest.raises(UserError, match="no checksums"):
        acquire(f"file://{src_dir}", dest, log=print)
    assert not dest.exists()

    logs: list[str] = []
    record = acquire(f"file://{src_dir}", dest, allow_unverified=True, log=logs.append)
    assert record["status"] == "unverified (trust on first use)"
    assert any(line.startswith("warning:") for line in logs)
    assert_acquired(dest, PAYLOAD)
    # Trust on first use: the next run checks against what was recorded.
    assert acquire(f"file://{src_dir}", dest, allow_unverified=True, log=print) == record


def test_manifest_files_sha256sum_and_json(src_dir: Path, tmp_path: Path) -> None:
    sums = tmp_path / "model.sha256"
    lines = [f"{SHA[p]}  ./{p}" if i % 2 else f"{SHA[p].upper()} *{p}" for i, p in enumerate(sorted(SHA))]
    sums.write_text("# pinned\n\n" + "\n".join(lines) + "\n")
    assert read_manifest(sums) == SHA
    as_json = tmp_path / "model.json"
    as_json.write_text(json.dumps(SHA))
    assert read_manifest(as_json) == SHA

    acquire(f"file://{src_dir}", tmp_path / "d", manifest=sums, log=print)
    assert_acquired(tmp_path / "d", PAYLOAD)

    sums.write_text("deadbeef  config.json\n")
    with pytest.raises(UserError, match=r"model.sha256:1: not a sha256sum line"):
        read_manifest(sums)
    as_json.write_text(json.dumps({"../escape": SHA["config.json"]}))
    with pytest.raises(UserError, match="invalid file path"):
        read_manifest(as_json)


def test_single_file_and_relative_file_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path / "ds", {"val.jsonl": b"{}\n"})
    monkeypatch.chdir(tmp_path)
    record = acquire("file://ds/val.jsonl", tmp_path / "out", sha256={"val.jsonl": sha256_bytes(b"{}\n")}, log=print)
    assert record["source"] == "file://ds/val.jsonl"
    assert_acquired(tmp_path / "out", {"val.jsonl": b"{}\n"})


def test_verify_dir_catches_damage_and_acquire_repairs(src_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "d"
    acquire(f"file://{src_dir}", dest, sha256=SHA, log=print)
    (dest / "config.json").write_bytes(b"corrupted by a later stage")
    with pytest.raises(UserError, match=r"(?s)checksum mismatch for .config.json.*re-run the acquire stage"):
        verify_dir(dest)
    assert not (dest / "config.json").exists() and not (dest / RECORD_NAME).exists()
    assert (tmp_path / "quarantine" / "d" / "config.json").read_bytes() == b"corrupted by a later stage"

    acquire(f"file://{src_dir}", dest, sha256=SHA, log=print)
    assert_acquired(dest, PAYLOAD)


def test_changed_checksums_reacquire_and_foreign_dirs_are_not_overwritten(src_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "d"
    acquire(f"file://{src_dir}", dest, sha256=SHA, log=print)
    (src_dir / "config.json").write_bytes(b"v2")
    logs: list[str] = []
    acquire(f"file://{src_dir}", dest, sha256=dict(SHA, **{"config.json": sha256_bytes(b"v2")}), log=logs.append)
    assert (dest / "config.json").read_bytes() == b"v2" and any("changed" in line for line in logs)
    # A failed re-acquisition must not leave the old copy looking complete for the new request.
    with pytest.raises(UserError, match="checksum mismatch"):
        acquire(f"file://{src_dir}", dest, sha256=dict(SHA, **{"config.json": "9" * 64}), log=print)
    assert not (dest / RECORD_NAME).exists()
    with pytest.raises(UserError, match="not a completed acquisition"):
        verify_dir(dest)

    foreign = write_tree(tmp_path / "mine", {"thesis.tex": b"precious"})
    with pytest.raises(UserError, match="not created by the acquire stage"):
        acquire(f"file://{src_dir}", foreign, allow_unverified=True, log=print)
    assert (foreign / "thesis.tex").read_bytes() == b"precious"


# --------------------------------------------------------------------------- https://


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):
    return self_signed_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def https_server(tls):
    context, _cert = tls
    files = {f"/repo/{p}": body for p, body in PAYLOAD.items()} | {"/single/model.onnx": b"onnx-bytes"}
    with LoopbackServer(static_files(files), tls=context) as server:
        yield server


def test_https_single_file_verified_and_rerun_is_offline(https_server: LoopbackServer, tls, tmp_path: Path) -> None:
    _context, cert = tls
    dest = tmp_path / "onnx"
    sha = {"model.onnx": sha256_bytes(b"onnx-bytes")}
    record = acquire(f"{https_server.url}/single/model.onnx", dest, sha256=sha, ca_bundle=cert, log=print)
    assert record["status"] == "verified" and record["scheme"] == "https"
    assert_acquired(dest, {"model.onnx": b"onnx-bytes"})
    seen = len(https_server.requests)
    assert seen == 1

    logs: list[str] = []
    assert acquire(f"{https_server.url}/single/model.onnx", dest, sha256=sha, ca_bundle=cert, log=logs.append) == record
    assert len(https_server.requests) == seen, "re-run on a verified dir must not download again"
    assert any("nothing to download" in line for line in logs)


def test_https_directory_url_with_file_list_and_env_ca(
    https_server: LoopbackServer, tls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls[1]))
    acquire(f"{https_server.url}/repo/", tmp_path / "d", sha256=SHA, log=print)
    assert_acquired(tmp_path / "d", PAYLOAD)
    assert "/repo/weights/part%201.bin" in [r.path for r in https_server.requests]


def test_https_untrusted_certificate_is_explained(https_server: LoopbackServer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    with pytest.raises(UserError, match="SSL_CERT_FILE"):
        acquire(f"{https_server.url}/single/model.onnx", tmp_path / "d", allow_unverified=True, log=print)


def test_https_404_names_url_and_status(https_server: LoopbackServer, tls, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"/single/missing.onnx answered HTTP 404"):
        acquire(
            f"{https_server.url}/single/missing.onnx",
            tmp_path / "d",
            sha256={"missing.onnx": "a" * 64},
            ca_bundle=tls[1],
            log=print,
        )
    assert not (tmp_path / "d").exists()


def test_https_corrupted_payload_is_quarantined(https_server: LoopbackServer, tls, tmp_path: Path) -> None:
    dest = tmp_path / "dl" / "onnx"
    with pytest.raises(UserError, match="checksum mismatch for 'model.onnx'"):
        acquire(
            f"{https_server.url}/single/model.onnx",
            dest,
            sha256={"model.onnx": sha256_bytes(b"the real model")},
            ca_bundle=tls[1],
            log=print,
        )
    assert (tmp_path / "dl" / "quarantine" / "onnx" / "model.onnx").read_bytes() == b"onnx-bytes"
    assert not dest.exists()


def test_https_credentials_are_used_but_never_stored(https_server: LoopbackServer, tls, tmp_path: Path) -> None:
    host = https_server.url.removeprefix("https://")
    logs: list[str] = []
    dest = tmp_path / "d"
    record = acquire(
        f"https://alice:pw-Z9q7x@{host}/single/model.onnx?token=sig-Q3k8&v=1",
        dest,
        sha256={"model.onnx": sha256_bytes(b"onnx-bytes")},
        ca_bundle=tls[1],
        log=logs.append,
    )
    assert record["source"] == f"https://{host}/single/model.onnx?token=REDACTED&v=1"
    assert https_server.requests[-1].headers["authorization"].startswith("Basic ")
    written = b"".join(body for _, body in all_bytes_under(tmp_path))
    for secret in ("pw-Z9q7x", "sig-Q3k8"):
        assert secret.encode() not in written and secret not in "\n".join(logs) and secret not in json.dumps(record)


def test_plain_http_needs_explicit_opt_in(tmp_path: Path) -> None:
    with LoopbackServer(static_files({"/f.txt": b"hello"})) as server:
        with pytest.raises(UserError, match="refusing plain-http"):
            acquire(f"{server.url}/f.txt", tmp_path / "d", allow_unverified=True, log=print)
        assert server.requests == []
        acquire(
            f"{server.url}/f.txt",
            tmp_path / "d",
            sha256={"f.txt": sha256_bytes(b"hello")},
            allow_insecure_http=True,
            log=print,
        )
    assert_acquired(tmp_path / "d", {"f.txt": b"hello"})


# --------------------------------------------------------------------------- hf://

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HF_FILES = {"config.json": b'{"model_type": "tiny"}', "model.safetensors": b"\x07" * 2048, "README.md": b"# tiny\n"}
HF_SHA = {p: sha256_bytes(HF_FILES[p]) for p in ("config.json", "model.safetensors")}  # README not wanted
TOKEN = "hf_unittest_Tk9vQ2xWm4"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    hf_constants = pytest.importorskip("huggingface_hub.constants")
    with LoopbackServer(HubStandIn("acme/tiny-llm", COMMIT, HF_FILES)) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)  # read at import time
        yield server


def test_hf_pinned_snapshot_token_sent_never_written(
    hub: LoopbackServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Capture everything the hub client could log, including its HF_DEBUG curl dumps.
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="huggingface_hub")
    monkeypatch.setattr("huggingface_hub.constants.HF_DEBUG", True)
    dest = tmp_path / "models" / "tiny"
    logs: list[str] = []
    record = acquire(f"hf://acme/tiny-llm@{COMMIT}", dest, sha256=HF_SHA, log=logs.append)

    assert record["status"] == "verified" and record["revision"] == COMMIT
    assert_acquired(dest, {p: HF_FILES[p] for p in HF_SHA})
    assert not (dest / "README.md").exists(), "only the files in the checksum map are fetched"
    assert hub.requests and all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in hub.requests)
    for path, body in all_bytes_under(tmp_path):
        assert TOKEN.encode() not in body, f"token leaked into {path}"
    assert TOKEN not in "\n".join(logs) and TOKEN not in json.dumps(record)
    out, err = capfd.readouterr()
    assert "Send: curl" in caplog.text  # the debug dump ran, and hid the token
    assert TOKEN not in caplog.text + out + err
    # The step's progress lines count the bytes the hub client wrote (all of them at the end).
    label = f"[progress] download hf://acme/tiny-llm@{COMMIT}"
    finished = next(line for line in err.splitlines() if line.startswith(f"{label}: finished: "))
    payload = format_bytes(sum(len(HF_FILES[p]) for p in HF_SHA))  # not the client's metadata or locks
    assert finished.split(": finished: ")[1].startswith(f"{payload}, ")

    seen = len(hub.requests)
    assert acquire(f"hf://acme/tiny-llm@{COMMIT}", dest, sha256=HF_SHA, log=print) == record
    assert len(hub.requests) == seen, "re-run on a verified dir must not contact the hub"


def test_hf_branch_revision_records_commit_and_warns(hub: LoopbackServer, tmp_path: Path) -> None:
    logs: list[str] = []
    record = acquire("hf://acme/tiny-llm@main", tmp_path / "d", sha256=HF_SHA, log=logs.append)
    assert record["revision"] == COMMIT
    assert any("pin the commit hash" in line for line in logs)


def test_hf_unpinned_revision_is_refused(hub: LoopbackServer, tmp_path: Path) -> None:
    for source in ("hf://acme/tiny-llm", "hf://acme/tiny-llm@"):
        with pytest.raises(UserError, match="no pinned revision"):
            acquire(source, tmp_path / "d", sha256=HF_SHA, log=print)
    assert hub.requests == []


def test_hf_bad_content_and_unknown_repo(hub: LoopbackServer, tmp_path: Path) -> None:
    wrong = dict(HF_SHA, **{"config.json": "f" * 64})
    with pytest.raises(UserError, match="checksum mismatch for 'config.json'"):
        acquire(f"hf://acme/tiny-llm@{COMMIT}", tmp_path / "d", sha256=wrong, log=print)
    assert (tmp_path / "quarantine" / "d" / "config.json").read_bytes() == HF_FILES["config.json"]
    assert not (tmp_path / "d").exists()

    with pytest.raises(UserError, match="Hugging Face Hub failed") as err:
        acquire(f"hf://acme/other@{COMMIT}", tmp_path / "e", sha256=HF_SHA, log=print)
    assert TOKEN not in str(err.value)

    with pytest.raises(UserError, match="missing file 'tokenizer.json'"):
        wanted = dict(HF_SHA, **{"tokenizer.json": "e" * 64})
        acquire(f"hf://acme/tiny-llm@{COMMIT}", tmp_path / "f", sha256=wanted, log=print)
    assert not [p for p in tmp_path.iterdir() if ".staging-" in p.name]
