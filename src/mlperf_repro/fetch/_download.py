"""Transports: put the artifact's files into a fresh staging directory.

Each fetcher only copies/downloads; verification and publishing happen in acquire().
"""

from __future__ import annotations

import base64
import glob
import http.client
import os
import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from urllib.parse import quote, unquote, urljoin, urlsplit

from .. import progress
from ..errors import UserError
from ._sources import COMMIT_RE, Source, redact_url

_CHUNK = 1 << 20


# --------------------------------------------------------------------------- file://


def fetch_local(src: Source, files_dir: Path) -> None:
    """Copy a local file or directory tree (real copies: later stages must not reach the source)."""
    assert src.path is not None
    path = src.path
    if path.is_file():
        jobs = [(path, files_dir / path.name)]
    elif path.is_dir():
        jobs = [
            (Path(dirpath, name), files_dir / Path(dirpath, name).relative_to(path))
            for dirpath, _dirnames, filenames in os.walk(path)
            for name in filenames
        ]
    else:
        raise UserError(f"source {src.display} does not exist (looked for {path.resolve()}); check the path.")
    total = sum(file.stat().st_size for file, _ in jobs)
    with progress.Progress(
        f"copy {src.display}", total=total, unit="B", waiting_for=f"the file system (copying from {path})"
    ) as reporter:
        for file, target in jobs:
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(file, target)  # follows symlinks: we want content, not links
            except OSError as exc:
                raise UserError(f"cannot copy {file} from {src.display}: {exc.strerror or exc}.") from None
            reporter.advance(target.stat().st_size)


def _downloaded_bytes(files_dir: Path) -> int:
    """Bytes of payload a Hub download into ``files_dir`` has written so far: the finished
    files and the ``.incomplete`` ones in the client's bookkeeping folder, not its metadata
    and locks (files appear and move while this walks: one that is gone counts as nothing)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(files_dir):
        bookkeeping = Path(dirpath).relative_to(files_dir).parts[:2] == (".cache", "huggingface")
        for name in filenames:
            if bookkeeping and not name.endswith(".incomplete"):
                continue
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


# --------------------------------------------------------------------------- https://


def make_ssl_context(ssl_context: ssl.SSLContext | None, ca_bundle: str | Path | None) -> ssl.SSLContext:
    """Caller's context, else a CA bundle from the argument or SSL_CERT_FILE / REQUESTS_CA_BUNDLE."""
    if ssl_context is not None:
        return ssl_context
    bundle = ca_bundle or os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE")
    if not bundle:
        return ssl.create_default_context()
    bundle_path = Path(bundle)
    if bundle_path.is_dir():
        return ssl.create_default_context(capath=str(bundle_path))
    if not bundle_path.is_file():
        raise UserError(f"CA bundle {bundle} does not exist; fix ca_bundle / SSL_CERT_FILE / REQUESTS_CA_BUNDLE.")
    return ssl.create_default_context(cafile=str(bundle_path))


class _RedirectGuard(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never from https down to plain http unless explicitly allowed."""

    def __init__(self, allow_insecure_http: bool) -> None:
        self.allow_insecure_http = allow_insecure_http

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[override]
        if urlsplit(newurl).scheme != "https" and not self.allow_insecure_http:
            raise UserError(
                f"{redact_url(req.full_url)} redirected to non-https {redact_url(newurl)}; refusing. "
                "Use a URL that stays on https."
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def fetch_https(
    src: Source,
    files_dir: Path,
    expected: dict[str, str] | None,
    *,
    ssl_context: ssl.SSLContext,
    timeout: float,
    allow_insecure_http: bool,
    log: Callable[[str], None],
) -> None:
    """One file from a file URL, or every expected file below a directory URL (ending in '/')."""
    assert src.url is not None
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=ssl_context), _RedirectGuard(allow_insecure_http)
    )
    auth = None
    if src.username is not None:
        token = base64.b64encode(f"{src.username}:{src.password or ''}".encode()).decode()
        auth = f"Basic {token}"
    base_path = urlsplit(src.url).path
    if base_path.endswith("/"):
        if not expected:
            raise UserError(
                f"{src.display} is a directory URL; give sha256/manifest checksums listing the files to fetch."
            )
        jobs = [(urljoin(src.url, quote(relpath)), relpath) for relpath in expected]
    else:
        name = unquote(PurePosixPath(base_path).name)
        if not name or name in (".", ".."):
            raise UserError(f"cannot tell a file name from {src.display}; end a directory URL with '/'.")
        jobs = [(src.url, name)]
    for url, relpath in jobs:
        log(f"downloading {redact_url(url)}")
        target = files_dir / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        _download(opener, url, target, auth=auth, timeout=timeout)


def _download(
    opener: urllib.request.OpenerDirector, url: str, target: Path, *, auth: str | None, timeout: float
) -> None:
    shown = redact_url(url)
    request = urllib.request.Request(url, headers={"User-Agent": "mlperf-repro-acquire"})
    if auth:
        # Unredirected: credentials must not follow a redirect to another host.
        request.add_unredirected_header("Authorization", auth)
    part = target.with_name(target.name + ".part")
    try:
        with opener.open(request, timeout=timeout) as response, open(part, "wb") as out:
            announced = response.headers.get("Content-Length")
            size = int(announced) if announced is not None and announced.isdigit() else None
            host = urlsplit(url).hostname or "the server"
            # Bytes, rate and ETA every interval; a stall names the server it waits for.
            with progress.Progress(
                f"download {shown}", total=size, unit="B", waiting_for=f"{host} to send more of {shown}"
            ) as reporter:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    reporter.advance(len(chunk))
            received = out.tell()
    except urllib.error.HTTPError as exc:
        exc.close()
        raise UserError(
            f"download failed: {shown} answered HTTP {exc.code} {exc.reason}. "
            "Check the URL (and credentials, for 401/403) in the config."
        ) from None
    except urllib.error.URLError as exc:
        hint = ""
        if isinstance(exc.reason, ssl.SSLCertVerificationError):
            hint = " If the server uses a private CA, point SSL_CERT_FILE (or ca_bundle) at its certificate."
        raise UserError(f"download failed: cannot fetch {shown}: {exc.reason}.{hint}") from None
    except (OSError, http.client.HTTPException) as exc:  # timeouts, resets, truncated chunked bodies
        raise UserError(
            f"download failed: {shown}: {type(exc).__name__}: {exc}. Retry, or check the network."
        ) from None
    if announced is not None and announced.isdigit() and int(announced) != received:
        raise UserError(f"download of {shown} was truncated ({received} of {announced} bytes); re-run to retry.")
    os.replace(part, target)


# --------------------------------------------------------------------------- hf://


def fetch_hf(
    src: Source,
    files_dir: Path,
    cache_dir: Path,
    expected: dict[str, str] | None,
    *,
    token: str | None,
) -> str | None:
    """snapshot_download into files_dir; returns the resolved commit hash when known.

    The token is passed explicitly (False when unset) so huggingface_hub never falls back to a
    token stored on disk. ``cache_dir`` is private scratch space, so nothing lands in (or is
    read from) the user's global cache.
    """
    assert src.repo_id and src.revision and src.repo_type
    try:
        from huggingface_hub import constants, snapshot_download
        from huggingface_hub.file_download import repo_folder_name
    except ImportError:
        raise UserError("hf:// sources need the huggingface_hub package; install it in this environment.") from None
    if constants.is_offline_mode():
        raise UserError(
            f"cannot fetch {src.display}: HF_HUB_OFFLINE is set. Unset it to download, "
            "or use a file:// source pointing at a local copy."
        )
    allow = [glob.escape(p) for p in expected] if expected else None  # names are literal, not patterns
    # The hub client's own bars go to a terminal only; the payload it has written so far is
    # what the step's progress lines count.
    reporter = progress.Progress(
        f"download {src.display}",
        unit="B",
        count=lambda: _downloaded_bytes(files_dir),
        waiting_for=f"the Hugging Face Hub ({os.environ.get('HF_ENDPOINT') or 'huggingface.co'})",
    )
    try:
        with reporter:
            snapshot_download(
                src.repo_id,
                repo_type=src.repo_type,
                revision=src.revision,
                local_dir=files_dir,
                cache_dir=cache_dir,
                allow_patterns=allow,
                token=token or False,
                endpoint=os.environ.get("HF_ENDPOINT") or None,
                max_workers=4,
            )
    except Exception as exc:  # the hub client raises many types; all mean "this download failed"
        raise UserError(
            f"download of {src.display} from the Hugging Face Hub failed: {type(exc).__name__}: {exc}\n"
            "Check the repo id and revision, that HF_TOKEN grants access (gated/private repos), "
            "and HF_ENDPOINT if you use a mirror."
        ) from None
    # local_dir mode keeps its bookkeeping (etags, locks, tree listing) here; it is not payload.
    shutil.rmtree(files_dir / ".cache" / "huggingface", ignore_errors=True)
    try:
        (files_dir / ".cache").rmdir()
    except OSError:
        pass
    if COMMIT_RE.fullmatch(src.revision):
        return src.revision
    ref = cache_dir / repo_folder_name(repo_id=src.repo_id, repo_type=src.repo_type) / "refs" / src.revision
    try:
        return ref.read_text().strip() or None
    except OSError:
        return None
