"""A checkpoint the vendor downloads without a revision, pinned from the round's other code
(published/pins.py): one full commit is taken and named; several, or none, leave a TODO:. Trees
built here (tests/published_tree.py and lines written below); any line text is read safely."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from published_tree import SYSTEM, write_published

from mlperf_repro.cli import DEFAULT_SCHEMA
from mlperf_repro.importer import build_import, write_import
from mlperf_repro.published.pins import find_pins, round_pin

REPO_ID = "meta-llama/Llama-2-70b-chat-hf"
COMMIT = hashlib.sha1(b"llama").hexdigest()
OTHER = hashlib.sha1(b"other").hexdigest()


def _code(root: Path, submitter: str, relative: str, text: str) -> Path:
    path = root / "closed" / submitter / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _imported(root: Path, tmp_path: Path) -> tuple[dict, str]:
    find_pins.cache_clear()
    out = write_import(build_import(root, "Vendor", SYSTEM), tmp_path / "imported.yaml", DEFAULT_SCHEMA)
    return yaml.safe_load(out.read_text()), out.read_text()


def test_the_rounds_one_pin_is_taken_and_named(tmp_path):
    root = tmp_path / "pub"
    write_published(root)
    _code(root, "Other", "code/llama2-70b/__init__.py", f"HF_MODEL_REPO = {{\"{REPO_ID}\": '{COMMIT}'}}\n")
    _code(root, "Third", "src/llama/setup.sh", f"huggingface-cli download {REPO_ID} --revision {COMMIT}\n")
    config, text = _imported(root, tmp_path)
    model = config["models"]["llama-2-70b-chat-hf"]
    assert model["source"] == f"hf://{REPO_ID}@{COMMIT}"
    assert "closed/Other/code/llama2-70b/__init__.py:1" in text
    assert any("names no revision" in note and COMMIT in note for note in config["imported"]["notes"])


def test_different_pins_or_a_longer_name_leave_the_revision_to_the_user(tmp_path):
    root = tmp_path / "pub"
    write_published(root)
    # A repository whose name starts with the vendor's is another repository.
    _code(root, "Other", "code/a.py", f'REPO = "{REPO_ID}-GPTQ@{COMMIT}"\n')
    config, _ = _imported(root, tmp_path)
    assert "TODO:" in config["models"]["llama-2-70b-chat-hf"]["source"]
    _code(root, "Other", "code/b.py", f'pins = {{"{REPO_ID}": "{COMMIT}"}}\n')
    _code(root, "Third", "code/c.sh", f"hf download {REPO_ID} --revision {OTHER}\n")
    config, _ = _imported(root, tmp_path)
    assert "TODO:" in config["models"]["llama-2-70b-chat-hf"]["source"]
    assert any("2 different commits" in note for note in config["imported"]["notes"])


def test_a_short_revision_is_completed_by_a_matching_pin(tmp_path):
    root = tmp_path / "pub"
    _code(root, "A", "setup/x.sh", f"hf download {REPO_ID} --revision {COMMIT}\n")
    _code(root, "B", "setup/y.sh", f"hf download {REPO_ID} --revision {OTHER}\n")
    pin, commits = round_pin(root, REPO_ID, COMMIT[:7])
    assert pin is not None and pin.commit == COMMIT and commits == [COMMIT]
    assert round_pin(root, REPO_ID, "abcdef0") == (None, [])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.one_of(
            st.text(max_size=80),
            st.builds(
                lambda a, b, c: f"{a}{REPO_ID}{b}{c}",
                st.text(max_size=10),
                st.text(max_size=10),
                st.sampled_from([COMMIT, COMMIT.upper(), COMMIT[:39], COMMIT + "0", ""]),
            ),
        ),
        max_size=8,
    ),
    raw=st.binary(max_size=64),
)
def test_any_file_content_reads_safely_and_pins_only_full_lowercase_commits(tmp_path_factory, lines, raw):
    root = tmp_path_factory.mktemp("tree")
    path = _code(root, "X", "src/f.py", "\n".join(lines))
    with open(path, "ab") as handle:
        handle.write(raw)
    find_pins.cache_clear()
    for pin in find_pins(root, REPO_ID):
        assert len(pin.commit) == 40 and pin.commit == pin.commit.lower()
        line = path.read_bytes().decode("utf-8", errors="replace").splitlines()[pin.line - 1]
        assert REPO_ID in line and pin.commit in line
