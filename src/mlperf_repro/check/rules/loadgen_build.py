"""Each run's LoadGen is the unmodified release it names.

The rules forbid changing LoadGen, and every log says what it was built from:
``loadgen_git_status_message`` (what ``git status`` said in its checkout when it was built:
empty for a clean one, ``NA`` for a build outside git, as every published v5.1 and v6.0
log says) and ``loadgen_file_sha1`` (the sha1 of each of its source files). So:

- a status that lists files is a LoadGen built from changed sources;
- a file's hash that is not 40 hex digits is no hash LoadGen wrote;
- two logs of one submitter whose LoadGen names the same commit (``loadgen_version``
  "6.0.6 @ fb1d0c0948") were built from the same sources, so their source files' hashes
  agree. A version without a commit ("6.0.9 @ NA": a build outside git) names no sources,
  and packages built beside the sources (a ``.whl``) differ from build to build: neither
  is compared (published v6.0 Dell and NVIDIA logs of "6.0.9 @ NA" hold two mlperf.conf
  versions; v5.1 Dell's wheels differ build to build).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..evidence import cross_checked, derived
from ..findings import Finding
from ..model import DETAIL_LOG, TreeContext, rule, run_logs

_SHA1 = re.compile(r"[0-9a-f]{40}")
# What a log says for a clean checkout, and for a LoadGen built outside git.
_CLEAN_STATUS = ("", "NA")
# Built packages, not sources: their hash changes with every build of one commit.
_BUILT_SUFFIXES = (".whl", ".so", ".egg")


def _commit(version: Any) -> str | None:
    """The commit a ``loadgen_version`` names ("6.0.6 @ fb1d0c0948" -> "fb1d0c0948")."""
    if not isinstance(version, str) or "@" not in version:
        return None
    commit = version.split("@", 1)[1].strip()
    return commit if re.fullmatch(r"[0-9a-fA-F]{7,40}", commit) else None


@rule(
    "loadgen-build",
    evidence=[
        derived(
            DETAIL_LOG,
            "loadgen_git_status_message",
            "a clean checkout's git status is empty (NA outside git): a status listing files is a changed LoadGen",
        ),
        cross_checked(
            DETAIL_LOG,
            "loadgen_file_sha1",
            "the same source file's hash in the submitter's other logs of the same LoadGen commit "
            "(loadgen_version); each a 40-hex sha1",
        ),
    ],
)
def check_loadgen_build(ctx: TreeContext) -> list[Finding]:
    """Every detail log of the submitter (performance, accuracy, compliance runs): LoadGen
    built from a clean checkout, and one commit's source files hashed alike in all logs."""
    findings = []
    # (commit, source file) -> sha1 -> the logs that give it
    hashes: dict[tuple[str, str], dict[str, list[Path]]] = defaultdict(lambda: defaultdict(list))
    for result in ctx.results:
        for log in run_logs(ctx, result):
            detail = ctx.detail_at(log.path)
            where = ctx.rel(log.path)
            status = detail.get("loadgen_git_status_message")
            if status is not None and str(status).strip() not in _CLEAN_STATUS:
                shown = " ".join(str(status).split())[:120]
                findings.append(
                    Finding(
                        "loadgen-build",
                        where,
                        f"LoadGen was built from changed sources (loadgen_git_status_message: {shown!r}); "
                        "the rules allow only an unmodified LoadGen: rebuild it from a clean checkout and rerun",
                    )
                )
            files = detail.get("loadgen_file_sha1")
            if not isinstance(files, dict):
                continue
            malformed = sorted(name for name, sha in files.items() if not _SHA1.fullmatch(str(sha)))
            if malformed:
                findings.append(
                    Finding(
                        "loadgen-build",
                        where,
                        f"loadgen_file_sha1 holds no sha1 for {', '.join(malformed[:3])} "
                        f"({files[malformed[0]]!r}): LoadGen writes 40 hex digits for each source file",
                    )
                )
            commit = _commit(detail.get("loadgen_version"))
            if commit is None:
                continue
            for name, sha in files.items():
                if str(name).endswith(_BUILT_SUFFIXES) or name in malformed:
                    continue
                hashes[(commit, str(name))][str(sha)].append(log.path)
    for (commit, name), seen in sorted(hashes.items()):
        if len(seen) < 2:
            continue
        # The hash most logs give is the reference; each other one is named at its first log.
        (usual, usual_logs), *others = sorted(seen.items(), key=lambda item: (-len(item[1]), min(item[1])))
        for sha, paths in others:
            findings.append(
                Finding(
                    "loadgen-build",
                    ctx.rel(min(paths)),
                    f"LoadGen {commit}'s {name} has sha1 {sha[:12]}... here (and in {len(paths) - 1} other log(s)), "
                    f"but {usual[:12]}... in {len(usual_logs)} log(s) such as {ctx.rel(min(usual_logs))}: "
                    "one commit's sources hash differently, so LoadGen was changed",
                )
            )
    return findings
