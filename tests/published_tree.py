"""Synthetic published submissions in the layout vendors publish (v6.0: systems JSON, results
with user.conf, the harness command in README.md and LoadGen's detail log, the harness configs
under src/, setup scripts under setup/). Written here from scratch; no published file is
copied. Used by the import and compare tests."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

SYSTEM = "8xGPU_2xCPU"
LOADGEN_MODEL = {"Offline": "llama2-70b", "Server": "llama2-70b", "Interactive": "llama2-70b-interactive"}


def mllog(key: str, value) -> str:
    return ":::MLLOG " + json.dumps({"key": key, "value": value, "time_ms": 0.0, "namespace": "mlperf::logging"})


def detail_log(scenario: str, target_qps: float, tokens_per_s: float, version: str = "6.0.6") -> str:
    field = "result_tokens_per_second" if scenario == "Offline" else "result_completed_tokens_per_second"
    lines = [
        mllog("loadgen_version", f"{version} @ 0123456789"),
        mllog("effective_scenario", "Offline" if scenario == "Offline" else "Server"),
        mllog("effective_target_qps", target_qps),
        mllog("effective_min_duration_ms", 600000),
        mllog("result_validity", "VALID"),
        mllog(field, tokens_per_s),
    ]
    return "\n".join(lines) + "\n"


def harness_yaml(scenario: str, checkpoint: str, max_num_seqs: int, extra_env: dict | None = None) -> dict:
    return {
        "benchmark_name": LOADGEN_MODEL[scenario],
        "scenario": scenario.lower(),
        "engine_version": "sync" if scenario == "Offline" else "async",
        "vllm_env_config": {"VLLM_USE_V1": 1, "GPU_QUEUES": 2, **(extra_env or {})},
        "vllm_engine_config": {
            "model": checkpoint,
            "tensor_parallel_size": 1,
            "quantization": "quark",
            "kv_cache_dtype": "fp8",
            "max_model_len": 2048,
            "max_num_seqs": max_num_seqs,
            "compilation_config": {"cudagraph_capture_range": [[64, 0, -16], 4, 2, 1]},
        },
        "vllm_sampling_config": {"temperature": 0.0, "top_k": 1, "max_tokens": 1024, "min_tokens": 1},
        "harness_config": {"dataset_path": "/data/orca.pkl", "device_count": 4, "target_qps": -1},
    }


def write_published(
    root: Path,
    submitter: str = "Vendor",
    *,
    scenarios: dict[str, float] | None = None,
    checkpoint: str = "/model/llama/fp4_gptq",
    min_duration_ms: int = 1800000,
    description: dict | None = None,
    user_conf_extra: str = "",
    version: str = "6.0.6",
    max_num_seqs: dict[str, int] | None = None,
    extra_env: dict | None = None,
) -> Path:
    """closed/<submitter>/... under ``root``; returns the submitter folder."""
    scenarios = scenarios or {"Offline": 370.0, "Server": 360.0}
    max_num_seqs = max_num_seqs or {"Offline": 2048, "Server": 1024, "Interactive": 512}
    base = root / "closed" / submitter
    (base / "systems").mkdir(parents=True, exist_ok=True)
    desc = {
        "division": "closed",
        "submitter": submitter,
        "system_name": "Four-GPU test box",
        "system_type": "datacenter",
        "status": "available",
        "number_of_nodes": "1",
        "accelerators_per_node": "4",
        "accelerator_model_name": "Test GPU 64GB",
        "host_processors_per_node": "2",
        "host_processor_core_count": "32",
        "host_processor_model_name": "Test CPU",
        "accelerator_host_interconnect": "PCIe Gen 5 x16",
        "framework": "PyTorch 2.9, ROCm 7",
        "host_memory_capacity": "1.5 TB",
        "host_memory_configuration": "24x 64GB DDR5",
        "host_storage_capacity": "4 TB",
        "host_storage_type": "NVMe SSD",
        "host_networking": "Ethernet 10G",
        "host_network_card_count": "2",
        "host_networking_topology": "switched",
        "accelerator_memory_capacity": "64 GB",
        "accelerator_memory_configuration": "HBM3",
        "accelerator_interconnect": "XGMI",
        "cooling": "",
        "operating_system": "Ubuntu 22.04",
        "other_software_stack": "ROCm 7.0",
        "power_supply_details": "",
        **(description or {}),
    }
    (base / "systems" / f"{SYSTEM}.json").write_text(json.dumps(desc, indent=4))
    code = base / "src"
    (code / "llama2-70b-99").mkdir(parents=True, exist_ok=True)
    (code / "harness_llm" / "common").mkdir(parents=True, exist_ok=True)
    (code / "harness_llm" / "common" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "benchmark_name": "MISSING",
                "env_config": {"HARNESS_GC_LIMIT": 100000},
                "vllm_env_config": {"VLLM_USE_V1": 1},
                "vllm_sampling_config": {"n": 1, "ignore_eos": False},
                "harness_config": {"target_qps": -1, "debug_dump": False, "output_log_dir": "/logs"},
            }
        )
    )
    for scenario, qps in scenarios.items():
        name = f"{scenario.lower()}_x"
        env = dict(extra_env or {}) if scenario == "Server" else {}
        (code / "llama2-70b-99" / f"{name}.yaml").write_text(
            yaml.safe_dump(harness_yaml(scenario, checkpoint, max_num_seqs[scenario], env))
        )
        folder = base / "results" / SYSTEM / "llama2-70b-99" / scenario
        (folder / "performance" / "run_1").mkdir(parents=True, exist_ok=True)
        model, loadgen_scenario = LOADGEN_MODEL[scenario], "Offline" if scenario == "Offline" else "Server"
        (folder / "user.conf").write_text(
            "# LoadGen settings\n"
            f"{model}.*.performance_sample_count_override = 24576\n"
            f"*.{loadgen_scenario}.min_duration = 600000\n"
            f"{model}.{loadgen_scenario}.min_duration = {min_duration_ms}\n"
            f"{model}.{loadgen_scenario}.target_qps = {qps:g}\n" + user_conf_extra
        )
        (folder / "README.md").write_text(
            "# Run\n\n```bash\npython /work/code/main.py \\\n"
            f"   --config-path /work/code/llama2-70b-99/ \\\n   --config-name {name} \\\n"
            "   test_mode=performance \\\n   harness_config.device_count=4\n\n"
            "python /work/code/main.py --config-path /work/code/llama2-70b-99/ "
            f"--config-name {name} test_mode=accuracy\n```\n"
        )
        (folder / "performance" / "run_1" / "mlperf_log_detail.txt").write_text(
            detail_log(scenario, qps, qps * 280.0, version)
        )
    setup = base / "setup" / "llama2-70b-99"
    (setup / "dataset_and_model").mkdir(parents=True, exist_ok=True)
    (setup / "dataset_and_model" / "prepare_model.sh").write_text(
        '#!/bin/bash\nALGO=${2:-gptq}\nif [[ "$3" == "true" ]]; then\n'
        "    MODEL=vendor/llama-fp4-published\n    OUT=/model/llama/fp4_${ALGO}\n"
        "    hf download $MODEL --local-dir $OUT\n    exit 0\nfi\n"
        "MODEL=meta-llama/Llama-2-70b-chat-hf\nMODEL_PATH=/model/llama/orig\n"
        "hf download $MODEL --local-dir $MODEL_PATH\n"
        "pushd quark-0.10/examples > /dev/null\n"
        "python3 quantize_quark.py --model_dir $MODEL_PATH \\\n    --output_dir /model/llama/fp4_${ALGO} \\\n"
        "    --dataset /data/orca.calibration_1000.pkl --quant_scheme w_mxfp4_a_mxfp4 \\\n"
        "    --kv_cache_dtype fp8 --num_calib_data 1000 --seq_len 1024 --exclude_layers lm_head \\\n"
        "    --quant_algo $ALGO\npopd\n"
    )
    (setup / "build_docker.sh").write_text(
        '#!/bin/bash\nCONFIG_FILE="vllm_x.config"\nif [[ -n "$1" ]]; then\n'
        '  CONFIG_FILE="$1"\nfi\nsource "$CONFIG_FILE"\n'
    )
    (setup / "vllm_x.config").write_text(
        "export VLLM_REV=abc123\nexport DOCKER_BASE_IMAGE=vendor/base:1\n"
        "export DOCKER_RESULT_IMAGE=vendor/inference:llama_x\n"
    )
    (base / "documentation").mkdir(exist_ok=True)
    (base / "documentation" / "calibration.md").write_text(
        "We apply AutoSmoothQuant and GPTQ for MXFP4, and even rounding of the scales.\n"
    )
    return base
