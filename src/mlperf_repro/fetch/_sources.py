"""Parsing artifact source strings, and keeping their secrets out of everything we write."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..errors import UserError

COMMIT_RE = re.compile(r"[0-9a-f]{40}")
_HF_RE = re.compile(r"hf://(?:(?P<kind>models|datasets|spaces)/)?(?P<repo>[^/@]+(?:/[^/@]+)?)(?:@(?P<rev>.*))?")
# Query parameters that commonly carry credentials (signed URLs, API keys).
_SECRET_PARAM = re.compile(r"token|sig|signature|key|secret|password|passwd|credential|auth", re.I)
_HF_KINDS = {None: "model", "models": "model", "datasets": "dataset", "spaces": "space"}


@dataclass(frozen=True)
class Source:
    scheme: str  # "file", "https", "http" or "hf"
    display: str  # the source with secrets stripped: safe for records and logs
    path: Path | None = None  # file:
    url: str | None = None  # http(s): without userinfo
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    query_secrets: tuple[str, ...] = field(default=(), repr=False)  # values redact_url blanks
    repo_id: str | None = None  # hf:
    repo_type: str | None = None
    revision: str | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        return ((self.password,) if self.password else ()) + self.query_secrets


def redact_url(url: str) -> str:
    """Drop userinfo and fragment, and blank credential-looking query values."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:  # IPv6 literal
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    query = urlencode(
        [(k, "REDACTED" if _SECRET_PARAM.search(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)],
        safe="/:",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def parse_source(source: str, *, allow_insecure_http: bool = False) -> Source:
    if source.startswith("file://"):
        # Taken literally (no percent-decoding): config authors write plain paths.
        raw = source[len("file://") :]
        if not raw:
            raise UserError(f"source {source!r} has no path; use file:///abs/path or file://relative/path.")
        return Source("file", source, path=Path(raw))
    if source.startswith(("https://", "http://")):
        parts = urlsplit(source)
        if parts.scheme == "http" and not allow_insecure_http:
            raise UserError(
                f"refusing plain-http source {redact_url(source)}: use https:// (or pass "
                "allow_insecure_http=True for a trusted local mirror)."
            )
        if not parts.hostname:
            raise UserError(f"source {redact_url(source)} has no host name.")
        display = redact_url(source)
        url = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, ""))
        return Source(
            parts.scheme,
            display,
            url=url,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            query_secrets=tuple(v for k, v in parse_qsl(parts.query) if _SECRET_PARAM.search(k) and v),
        )
    if source.startswith("hf://"):
        match = _HF_RE.fullmatch(source)
        if not match:
            raise UserError(
                f"cannot parse Hugging Face source {source!r}; expected hf://org/name@<commit> "
                "(or hf://datasets/org/name@<commit> for a dataset)."
            )
        rev = match["rev"]
        if not rev:
            raise UserError(
                f"Hugging Face source {source!r} has no pinned revision; append @<40-hex commit> "
                "(see the repo's 'Files and versions' history), e.g. hf://org/name@0123abcd...; "
                "a branch such as @main is accepted but can change under you."
            )
        return Source("hf", source, repo_id=match["repo"], repo_type=_HF_KINDS[match["kind"]], revision=rev)
    raise UserError(
        f"unsupported source {redact_url(source) if '://' in source else source!r}; "
        "use file://, https:// or hf://org/name@<revision>."
    )


class Scrubber:
    """Replace known secret strings in text that is about to be logged or raised."""

    def __init__(self, secrets: tuple[str | None, ...]) -> None:
        # Very short strings would mangle ordinary text and are not meaningful secrets.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text
