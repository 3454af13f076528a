"""`mlperf-repro import`: a published system's submission -> one config (tests/published_tree.py
builds the published layout)."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from published_tree import SYSTEM, write_published

from mlperf_repro.check.preflight import preflight
from mlperf_repro.cli import DEFAULT_SCHEMA
from mlperf_repro.config import validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.importer import build_import, write_import
from mlperf_repro.importer.yaml_text import Noted, dump, plain
from mlperf_repro.launch import LAUNCHERS
from mlperf_repro.plan import Plan
from mlperf_repro.published.loadgen_conf import effective, read_conf
from mlperf_repro.published.serving import capture_sizes

REPO_CONFIG_EXAMPLES = REPO / "config" / "examples"


def _import(root: Path, tmp_path: Path, **kwargs):
    imported = build_import(root, "Vendor", SYSTEM, **kwargs)
    out = write_import(imported, tmp_path / "imported.yaml", DEFAULT_SCHEMA)
    return imported, yaml.safe_load(out.read_text()), out.read_text()


def test_import_reproduces_the_published_setup(tmp_path):
    write_published(tmp_path / "pub", extra_env={"SERVER_ONLY": 1})
    imported, config, text = _import(tmp_path / "pub", tmp_path)
    system = config["systems"][SYSTEM]
    # The description verbatim, counts as numbers.
    assert system["description"]["accelerator_host_interconnect"] == "PCIe Gen 5 x16"
    assert system["description"]["accelerators_per_node"] == 4
    assert "division" not in system["description"] and config["division"] == "closed"
    # LoadGen settings from each scenario's user.conf (the specific line wins over the wildcard).
    scenarios = system["benchmarks"]["llama2-70b-99"]
    assert scenarios["Offline"]["target_qps"] == 370 and scenarios["Offline"]["min_duration_ms"] == 1800000
    assert scenarios["Server"]["target_qps"] == 360
    # The serving setup: one server per GPU, shared engine args at the system, the rest per scenario.
    engine = system["engine"]
    assert engine["backend"] == "endpoints"
    assert engine["endpoints"]["allocation"]["servers_per_node"] == 4
    assert engine["endpoints"]["allocation"]["accelerator_count"] == 1
    assert engine["engine_args"]["kv_cache_dtype"] == "fp8" and "max_num_seqs" not in engine["engine_args"]
    assert scenarios["Offline"]["engine"]["engine_args"]["max_num_seqs"] == 2048
    assert scenarios["Server"]["engine"]["env"] == {"SERVER_ONLY": "1"}
    assert engine["env"]["HARNESS_GC_LIMIT"] == "100000"  # the harness's common defaults apply too
    capture = engine["engine_args"]["compilation_config"]["cudagraph_capture_sizes"]
    assert capture == [1, 2, 4, 16, 32, 48, 64]
    # The quantization the setup script runs and the documentation describes.
    recipe = config["quantization"][config["benchmarks"]["llama2-70b-99"]["quantization"]]
    assert recipe["scheme"] == "mxfp4" and recipe["tool"] == "quark" and recipe["kv_cache"] == "fp8"
    assert recipe["algorithms"] == ["autosmoothquant", "gptq"]
    assert recipe["calibration"]["samples"] == 1000 and recipe["scale_mode"] == "even"
    assert config["datasets"][recipe["calibration"]["dataset"]]["file"] == "orca.calibration_1000.pkl"
    # The published results are kept for comparing with.
    assert config["imported"]["results"][SYSTEM]["llama2-70b-99"]["Offline"]["value"] == pytest.approx(370 * 280.0)
    # Every value names its source file.
    assert "closed/Vendor/results/8xGPU_2xCPU/llama2-70b-99/Offline/user.conf:5" in text
    assert "closed/Vendor/src/llama2-70b-99/offline_x.yaml" in text
    assert "closed/Vendor/setup/llama2-70b-99/vllm_x.config" in text


def test_the_imported_config_plans_and_preflight_names_only_the_placeholders(tmp_path):
    write_published(tmp_path / "pub")
    imported, config, _ = _import(tmp_path / "pub", tmp_path)
    validated = validate_config(copy.deepcopy(config), DEFAULT_SCHEMA, launchers=LAUNCHERS)
    estimate = estimate_plan(validated, set())
    assert estimate.render()
    findings = preflight(validated, tmp_path)
    placeholders = sorted(f.path for f in findings if f.rule == "placeholder")
    assert placeholders == sorted(
        [
            "models.llama-2-70b-chat-hf.source",
            "models.llama-2-70b-chat-hf.sha256_manifest",
            "datasets.open-orca-gpt4-llama2-processed.source",
            "datasets.open-orca-gpt4-llama2-processed.sha256_manifest",
            "datasets.open-orca-gpt4-llama2-processed-calibration.source",
            "datasets.open-orca-gpt4-llama2-processed-calibration.sha256_manifest",
            f"systems.{SYSTEM}.software.container",
            # The source leaves it empty; the checker needs it filled.
            f"systems.{SYSTEM}.description.cooling",
        ]
    )
    # The rest are facts of the machine preflight runs on (free disk for a 70B model), not of the
    # config, and the import's own notes, repeated as warnings.
    assert {f.rule for f in findings} <= {"placeholder", "disk-space", "quark-env", "imported-note"}
    assert all(f.severity == "warning" for f in findings if f.rule == "imported-note")
    message = next(f.message for f in findings if f.path == f"systems.{SYSTEM}.software.container")
    assert "put the 64 hex digest of your build of the vendor image there" in message


def test_each_scenario_runs_with_its_own_engine_settings(tmp_path):
    write_published(tmp_path / "pub")
    _, config, _ = _import(tmp_path / "pub", tmp_path)
    plan = Plan(validate_config(copy.deepcopy(config), DEFAULT_SCHEMA, launchers=LAUNCHERS))
    offline = plan.run_engine(SYSTEM, "llama2-70b-99", "Offline")
    server = plan.run_engine(SYSTEM, "llama2-70b-99", "Server")
    assert offline["engine_args"]["max_num_seqs"] == 2048 and server["engine_args"]["max_num_seqs"] == 1024
    assert offline["engine_args"]["kv_cache_dtype"] == server["engine_args"]["kv_cache_dtype"] == "fp8"
    assert plan.engine(SYSTEM)["engine_args"].get("max_num_seqs") is None


def test_a_tarball_imports_like_its_folder(tmp_path):
    write_published(tmp_path / "pub")
    archive = tmp_path / "published.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "pub" / "closed", arcname="closed")
    from_folder = build_import(tmp_path / "pub", "Vendor", SYSTEM, source_name="x").text
    from_tarball = build_import(archive, "Vendor", SYSTEM, source_name="x").text
    assert from_folder == from_tarball


def test_a_mixed_system_stays_mixed(tmp_path):
    write_published(
        tmp_path / "pub",
        description={
            "number_of_nodes": 3,
            "host_processor_core_count": "64(CPU A) and 96(CPU B) and 192(CPU C)",
            "accelerator_model_name": "GPU A (x8) and GPU B (x8) and GPU C (x8)",
        },
    )
    _, config, _ = _import(tmp_path / "pub", tmp_path)
    desc = config["systems"][SYSTEM]["description"]
    assert desc["host_processor_core_count"] == "64(CPU A) and 96(CPU B) and 192(CPU C)"
    assert desc["accelerator_model_name"] == "GPU A (x8) and GPU B (x8) and GPU C (x8)"
    assert config["systems"][SYSTEM]["engine"]["endpoints"]["allocation"]["nodes"] == 3


@pytest.mark.parametrize(
    ("kwargs", "args", "message"),
    [
        ({}, {"submitter": "Nobody"}, "--submitter Nobody: not in"),
        ({}, {"system": "9xGPU"}, "--system 9xGPU: Vendor has no systems/9xGPU.json; its systems: 8xGPU_2xCPU"),
        ({"version": "4.1.0"}, {}, "LoadGen 4.1.0 belongs to no round"),
        ({"user_conf_extra": "llama2-70b.Offline.target_qsp = 5\n"}, {}, "'target_qsp' is not a key LoadGen reads"),
    ],
)
def test_bad_input_is_one_clear_message_and_nothing_is_written(tmp_path, kwargs, args, message):
    write_published(tmp_path / "pub", **kwargs)
    out = tmp_path / "out.yaml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_repro",
            "import",
            str(tmp_path / "pub"),
            "--submitter",
            args.get("submitter", "Vendor"),
            "--system",
            args.get("system", SYSTEM),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not out.exists() and not list(tmp_path.glob(".out.yaml.*"))


def test_a_system_without_results_is_named(tmp_path):
    base = write_published(tmp_path / "pub")
    (base / "systems" / "other.json").write_text((base / "systems" / f"{SYSTEM}.json").read_text())
    with pytest.raises(UserError, match="describes it but has no results for it"):
        build_import(tmp_path / "pub", "Vendor", "other")


def test_user_conf_lines_apply_most_specific_first(tmp_path):
    conf = tmp_path / "user.conf"
    conf.write_text(
        "*.*.min_duration = 1\n*.Server.min_duration = 2\nm.*.min_duration = 3\nm.Server.min_duration = 4\n"
        "m.*.target_qps = 9\n"
    )
    lines = read_conf(conf, ["min_duration", "target_qps"])
    assert effective(lines, "m", "Server")["min_duration"].value == "4"
    assert effective(lines, "m", "Offline")["min_duration"].value == "3"
    assert effective(lines, "other", "Server")["min_duration"].value == "2"
    assert effective(lines, "other", "Offline")["min_duration"].value == "1"
    assert effective(lines, "m", "Offline")["target_qps"].value == "9"


def test_capture_range_expands_as_the_harness_does():
    assert capture_sizes([[32, 0, -8], 4, 2, 1]) == [1, 2, 4, 8, 16, 24, 32]
    with pytest.raises(UserError, match="neither"):
        capture_sizes(["x"])


def test_notes_are_comments_and_the_text_loads_back():
    node = {
        "a": Noted(1, "from a.conf"),
        "b": Noted({"c": [1, 2, 3] * 40, "d": "x"}, "a block"),
        "e": ["a long sentence " * 10, "short"],
    }
    text = dump(node, "header")
    assert yaml.safe_load(text) == plain(node)
    assert "a: 1  # from a.conf" in text and "# a block\nb:" in text
    assert all(len(line) <= 120 for line in text.splitlines() if not line.lstrip().startswith("- "))


def test_stand_in_substitutes_what_the_hardware_binds_and_lists_it(tmp_path):
    from conftest import E2E_CONFIG

    from mlperf_repro.cli import _stand_in

    write_published(tmp_path / "pub", scenarios={"Offline": 370.0, "Server": 360.0})
    imported = build_import(tmp_path / "pub", "Vendor", SYSTEM, stand_in=_stand_in(str(E2E_CONFIG)))
    out = write_import(imported, tmp_path / "standin.yaml", DEFAULT_SCHEMA)
    config = validate_config(yaml.safe_load(out.read_text()), DEFAULT_SCHEMA, launchers=LAUNCHERS)
    # The stand-in's benchmark, model and CPU system; the submitter's system id and scenarios.
    assert list(config["benchmarks"]) == ["tiny-llama-mxfp4"] and config["division"] == "open"
    system = config["systems"][SYSTEM]
    assert system["engine"]["backend"] == "endpoints" and system["engine"]["endpoints"]["launch"] == "shared"
    assert not system.get("software")
    assert list(system["benchmarks"]["tiny-llama-mxfp4"]) == ["Offline", "Server"]
    # Nothing is left to fill in: the stand-in runs here.
    assert [f for f in preflight(config, tmp_path) if f.rule == "placeholder"] == []
    substituted = config["imported"]["stand_in"]["substituted"]
    assert f"systems.{SYSTEM}.benchmarks.llama2-70b-99.Offline.target_qps: 370 -> 400" in substituted
    assert "division: closed -> open" in substituted
    assert any(
        line.startswith(f"systems.{SYSTEM}.description.accelerator_model_name: Test GPU 64GB ->")
        for line in substituted
    )
    assert any(line.startswith("# STAND-IN:") for line in out.read_text().splitlines()[:8])
    # The published results stay on record, to compare a run of this config with.
    assert config["imported"]["results"][SYSTEM]["llama2-70b-99"]["Server"]["value"] == pytest.approx(360 * 280.0)


def test_stand_in_without_a_matching_benchmark_is_named(tmp_path):
    from mlperf_repro.cli import _stand_in

    write_published(tmp_path / "pub")
    stand_in = _stand_in(str(REPO_CONFIG_EXAMPLES / "gpt-oss-demo.yaml"))
    with pytest.raises(UserError, match="it has no stand-in for llama2-70b-99"):
        build_import(tmp_path / "pub", "Vendor", SYSTEM, stand_in=stand_in)


def test_auto_qps_measures_from_the_submitters_rate(tmp_path):
    write_published(tmp_path / "pub")
    imported, config, text = _import(tmp_path / "pub", tmp_path, auto_qps=True)
    offline = config["systems"][SYSTEM]["benchmarks"]["llama2-70b-99"]["Offline"]
    assert offline["target_qps"] == "auto" and offline["start_qps"] == 370
    assert "measured on this machine first" in text
    estimate = estimate_plan(validate_config(copy.deepcopy(config), DEFAULT_SCHEMA, launchers=LAUNCHERS), set())
    assert any(row.stage == "find performance" for row in estimate.rows)


# Any values in the sections of a published harness config the importer and compare read: the
# import and the comparison come out, or stop with one message that names the config file.
YAML_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["MISSING", "8", "0.5", "fp8"])
    | st.dates()
)
YAML_VALUES = st.recursive(
    YAML_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=3),
    max_leaves=8,
)
SECTIONS = [
    "vllm_engine_config",
    "vllm_env_config",
    "env_config",
    "vllm_sampling_config",
    "sampling_params",
    "llm_config",
    "harness_config",
    "backend",
]
ENGINE_KEYS = ["tensor_parallel_size", "tp_size", "max_num_seqs", "model", "compilation_config"]
SAMPLING_KEYS = ["temperature", "top_p", "top_k", "max_tokens", "min_tokens", "ignore_eos"]


@pytest.fixture(scope="module")
def published_once(tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    write_published(root / "pub")
    return root / "pub"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_values_in_a_harness_config_are_read_or_named(published_once, tmp_path_factory, data):
    from mlperf_repro.compare.records import read_submission

    root = tmp_path_factory.mktemp("case") / "pub"
    shutil.copytree(published_once, root)
    config_file = root / "closed" / "Vendor" / "src" / "llama2-70b-99" / "offline_x.yaml"
    config = yaml.safe_load(config_file.read_text())
    section = data.draw(st.sampled_from(SECTIONS), label="section")
    if section == "vllm_engine_config" and data.draw(st.booleans(), label="one engine key"):
        key = data.draw(st.sampled_from(ENGINE_KEYS), label="key")
        config[section][key] = data.draw(
            YAML_VALUES | st.just({"cudagraph_capture_range": [[1, 10**9, 1]]}), label="value"
        )
    elif section == "vllm_sampling_config" and data.draw(st.booleans(), label="one sampling key"):
        config[section][data.draw(st.sampled_from(SAMPLING_KEYS), label="key")] = data.draw(YAML_VALUES, label="value")
    else:
        config[section] = data.draw(YAML_VALUES, label="value")
    config_file.write_text(yaml.safe_dump(config))
    try:
        imported = build_import(root, "Vendor", SYSTEM)
        write_import(imported, root.parent / "imported.yaml", DEFAULT_SCHEMA)
    except UserError as exc:
        assert "offline_x.yaml" in str(exc) or "imported.yaml" in str(exc), str(exc)
    try:
        records = read_submission(root, "published")
    except UserError as exc:
        assert "offline_x.yaml" in str(exc), str(exc)
    else:
        assert records


SCRIPT_LINES = st.sampled_from(
    [
        "A=$A$A$A$A",
        "A=x",
        'MODEL=${MODEL:-"/models/llama"}',
        "cd $A",
        "pushd quark-0.9/examples >/dev/null",
        "hf download org/model --local-dir $MODEL --revision abc",
        "python quantize_quark.py --model_dir $MODEL --quant_scheme w_mxfp4_a_mxfp4",
        "export B='unclosed",
        "cd",
        "# a comment",
    ]
)


@settings(max_examples=100, deadline=None)
@given(st.lists(SCRIPT_LINES | st.text(max_size=40), max_size=40))
def test_a_setup_script_of_any_lines_is_read(tmp_path_factory, lines):
    from mlperf_repro.published.setup_scripts import MAX_VALUE, read_script

    script = tmp_path_factory.mktemp("setup") / "download_model.sh"
    script.write_text("\n".join(lines), errors="surrogateescape")
    facts = read_script(script)
    assert all(len(value) <= MAX_VALUE for value in facts.variables.values())
