"""Loopback servers for the acquire-stage tests: a static (optionally TLS) file server and a
minimal stand-in for the Hugging Face Hub. Nothing here touches the network beyond 127.0.0.1."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

Response = tuple[int, dict[str, str], bytes]
App = Callable[[str, str, dict[str, str]], Response]  # (method, path, headers) -> response


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]


class LoopbackServer:
    """Run ``app`` on 127.0.0.1 in a background thread; records every request it receives."""

    def __init__(self, app: App, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[SeenRequest] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                owner.requests.append(SeenRequest(self.command, self.path, headers))
                status, out_headers, body = app(self.command, self.path, headers)
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **out_headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = _answer

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def static_files(files: dict[str, bytes]) -> App:
    """Serve ``files`` by URL path; anything else is a 404."""

    def app(method: str, path: str, headers: dict[str, str]) -> Response:
        body = files.get(unquote(urlsplit(path).path))
        if body is None:
            return 404, {"Content-Type": "text/plain"}, b"not found"
        return 200, {"Content-Type": "application/octet-stream"}, body

    return app


def self_signed_tls(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server TLS context for 127.0.0.1 and the certificate path clients should trust."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())  # much faster to generate than RSA
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "loopback-cert.pem", directory / "loopback-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    return context, cert_path


class HubStandIn:
    """Just enough of the Hub's HTTP API for ``snapshot_download`` of one model repo.

    - ``GET  /api/models/<repo>/revision/<rev>``  repo info: resolves a branch to its commit sha
    - ``GET  /api/models/<repo>/tree/<rev>``      recursive file listing (path, size, git oid)
    - ``HEAD|GET /<repo>/resolve/<rev>/<file>``  file metadata headers / content; the client
      needs X-Repo-Commit and ETag (and Content-Length for the size) on these.
    """

    def __init__(self, repo_id: str, commit: str, files: dict[str, bytes], branches: tuple[str, ...] = ("main",)):
        self.repo_id, self.commit, self.files = repo_id, commit, files
        self.revisions = {commit, *branches}

    def __call__(self, method: str, path: str, headers: dict[str, str]) -> Response:
        url_path = unquote(urlsplit(path).path)
        repo = re.escape(self.repo_id)
        if m := re.fullmatch(rf"/api/models/{repo}/(revision|tree)/([^/]+)", url_path):
            if m[2] not in self.revisions:
                return self._error(404, "RevisionNotFound")
            if m[1] == "revision":
                siblings = [{"rfilename": f} for f in sorted(self.files)]
                return self._json({"id": self.repo_id, "sha": self.commit, "siblings": siblings})
            return self._json(
                [
                    {"type": "file", "path": f, "size": len(body), "oid": _git_blob_id(body)}
                    for f, body in sorted(self.files.items())
                ]
            )
        if m := re.fullmatch(rf"/{repo}/resolve/([^/]+)/(.+)", url_path):
            if m[1] not in self.revisions:
                return self._error(404, "RevisionNotFound")
            body = self.files.get(m[2])
            if body is None:
                return self._error(404, "EntryNotFound")
            meta = {"X-Repo-Commit": self.commit, "ETag": f'"{_git_blob_id(body)}"'}
            return 200, {"Content-Type": "application/octet-stream", **meta}, body
        return self._error(404, "RepoNotFound")

    def _json(self, data: object) -> Response:
        return 200, {"Content-Type": "application/json", "X-Repo-Commit": self.commit}, json.dumps(data).encode()

    @staticmethod
    def _error(status: int, code: str) -> Response:
        return status, {"Content-Type": "application/json", "X-Error-Code": code}, json.dumps({"error": code}).encode()


def _git_blob_id(body: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
