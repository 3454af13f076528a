"""Assemble the v6.0 submission tree from the workflow's outputs.

Layout (MLCommons v6.0): ``<division>/<submitter>/{systems,src,documentation,results}``
with measurements and compliance folders inside each
``results/<system>/<benchmark>/<scenario>/``. Performance logs go to
``performance/run_1``; the accuracy log is truncated (original kept under results/runs).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from ..errors import UserError
from ..hashing import sha256_file
from ..loadgen_logs import read_detail
from ..plan import Plan
from ..quant.formats import format_for
from ..quant.tools import calibration_lines
from ..quant.tools import transformations as recipe_transformations
from .readme import scenario_readme
from .systems import system_description
from .truncate import hash_line, write_truncated_log

LOG_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
ACCURACY_LOG = "mlperf_log_accuracy.json"
# What of the workflow checkout goes into <submitter>/src, beside the package that ran.
CODE_ITEMS = (
    "Snakefile",
    "README.md",
    "pyproject.toml",
    "install.sh",
    "workflow",
    "scripts",
    "envs",
    "profiles",
    "config",
)
IGNORED = shutil.ignore_patterns("__pycache__", ".*", "*.pyc", "*.egg-info")
NOT_SUBMITTABLE_NOTE = """# NOT SUBMITTABLE

This tree was produced with `test_scale.enabled: true`: shortened runs on reduced sample
counts, for demonstrating and testing the pipeline. Its results are not MLPerf results
and must not be submitted or published as such. Disable `test_scale` in the config and
rerun to produce a submittable tree.
"""


def _json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _copy(src: Path, dst: Path) -> None:
    if not src.is_file():
        raise UserError(f"{src} is missing; rerun the stage that produces it")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def measurements(plan: Plan, benchmark: str) -> dict[str, Any]:
    bench = plan.benchmark_cfg(benchmark)
    model_cfg = plan.config["models"][bench["model"]]
    recipe_name = bench.get("quantization")
    recipe = (plan.config.get("quantization") or {}).get(recipe_name) if recipe_name else None
    if recipe:
        fmt = format_for(recipe["scheme"])  # the registry's words for the format
        weight_types = fmt.weight_data_types
        transformations = recipe_transformations(  # by the recipe's tool
            recipe, plan.config["models"], pipeline=plan.quantizes_pipeline(bench["model"], recipe_name)
        )
    else:
        weight_types = "bf16"
        transformations = "none"
    data = {
        "input_data_types": "int32 (token ids)",
        "retraining": "No",
        "starting_weights_filename": f"{bench['model']} ({model_cfg['source']})",
        "weight_data_types": weight_types,
        "weight_transformations": transformations,
    }
    if not plan.submittable:
        data["notes"] = "TEST SCALE - NOT SUBMITTABLE"
    return data


def _system_provenance(plan: Plan, system: str) -> dict[str, Any]:
    for job in plan.jobs:
        if job.system == system:
            path = Path(plan.packaged_run_dir(system, job.benchmark, job.scenario)) / "provenance.json"
            if path.is_file():
                return json.loads(path.read_text())
    return {}


def _copy_code(code_root: Path, dest: Path, config: dict[str, Any]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for item in CODE_ITEMS:
        src = code_root / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=IGNORED)
        elif src.is_file():
            shutil.copyfile(src, dest / item)
    # The package exactly as imported by the jobs (the code that talked to LoadGen).
    import mlperf_repro

    shutil.copytree(Path(mlperf_repro.__file__).parent, dest / "src" / "mlperf_repro", ignore=IGNORED)
    # The config this tree came from (validated, defaults filled): the sections that shape the
    # tree (Plan.submission_config; compare, estimate and scaling_study make other outputs).
    (dest / "config_used.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    # The checker rejects empty folders (a checkout can hold some that git does not track).
    for folder in sorted((p for p in dest.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


def _calibration_doc(plan: Plan) -> str:
    lines = ["# Quantization and calibration", ""]
    pairs = plan.quantized_models
    if not pairs:
        return "\n".join(lines + ["No quantization: models are served as acquired.", ""])
    for model, recipe_name in pairs:
        manifest_path = Path(plan.quantized_dir(model, recipe_name)) / "quant_manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
        recipe = plan.config["quantization"][recipe_name]
        lines += [
            f"## {model} with recipe `{recipe_name}`",
            "",
            # scheme, scales, exclusions, calibration
            *calibration_lines(
                recipe, plan.config["models"], manifest, pipeline=plan.quantizes_pipeline(model, recipe_name)
            ),
            f"- Codec: `{manifest.get('codec_version', '?')}` (this repository, src/mlperf_repro/quant).",
        ]
        error = manifest.get("logit_error")
        if error:
            lines.append(
                f"- Logit error vs the unquantized model on fixed inputs: {json.dumps(error, sort_keys=True)}."
            )
        for name, weights in (manifest.get("weight_error") or {}).items():  # a Diffusers pipeline's transformers
            lines.append(
                f"- `{name}`: relative weight error per quantized Linear, mean {weights.get('mean')}, "
                f"max {weights.get('max')} ({weights.get('count')} layers)."
            )
        served = (manifest.get("video_error") or {}).get("served")
        if served:
            lines.append(
                f"- Video vs the unquantized pipeline (one prompt, fixed latent, served weights): mean "
                f"{served['mean_abs_diff']} uint8 levels, PSNR {served['psnr_db']} dB."
            )
        lines.append("")
    return "\n".join(lines)


FAILED_NOTE = """# FAILED RESULTS KEPT ON REQUEST

The results below failed the pre-submission check and were packaged only because the
config says `package.failed_results: keep`. They would not pass review as they are.

"""


def apply_failure_policy(root: Path, rules, division: str, submitter: str, policy: str) -> dict[str, list[str]]:
    """Closed and network divisions: a result that fails the check is left out of the tree
    (``exclude``) or kept and marked FAILED (``keep``, an explicit choice in the config).
    Returns scenario folder -> reasons, for the summary."""
    from ..check.tree import failed_results

    if division == "open":
        return {}
    failed = {folder: [f.line() for f in findings] for folder, findings in failed_results(root, rules).items()}
    for folder, reasons in failed.items():
        path = root / folder
        if policy == "keep":
            readme = path / "README.md"
            banner = (
                "**FAILED CHECK - kept on request (`package.failed_results: keep`):**\n\n"
                + "\n".join(f"- {r}" for r in reasons)
                + "\n\n"
            )
            readme.write_text(banner + (readme.read_text() if readme.is_file() else ""))
        else:
            shutil.rmtree(path)
            for parent in (path.parent, path.parent.parent):  # empty benchmark / system folders
                if parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
    if failed and policy == "keep":
        (root / "FAILED_RESULTS.md").write_text(
            FAILED_NOTE
            + "\n".join(f"- `{folder}`: " + "; ".join(reasons) for folder, reasons in sorted(failed.items()))
            + "\n"
        )
    if policy != "keep":
        base = root / division / submitter
        remaining = {p.name for p in (base / "results").iterdir()} if (base / "results").is_dir() else set()
        for system_json in (base / "systems").glob("*.json"):
            if system_json.stem not in remaining:
                system_json.unlink()  # a description without results is itself an error
    return failed


def build_submission(plan: Plan, out_dir: str | Path, code_root: str | Path) -> Path:
    root = Path(out_dir)
    if root.exists():
        shutil.rmtree(root)
    base = root / plan.division / plan.submitter
    base.mkdir(parents=True)
    if not plan.submittable:
        (root / "NOT_SUBMITTABLE.md").write_text(NOT_SUBMITTABLE_NOTE)

    for system in plan.systems:
        system_cfg = plan.system_cfg(system)
        desc = system_description(
            system_cfg["description"],
            rules=plan.rules,
            division=plan.division,
            submitter=plan.submitter,
            provenance=_system_provenance(plan, system),
            test_scale=not plan.submittable,
            endpoints=((system_cfg["engine"].get("endpoints") or {}).get("list")),
            system=system,
            launch=(system_cfg["engine"].get("endpoints") or {}).get("launch"),
        )
        _json(base / "systems" / f"{system}.json", desc)

    _copy_code(Path(code_root), base / "src", plan.config)
    (base / "documentation").mkdir()
    (base / "documentation" / "calibration.md").write_text(_calibration_doc(plan))
    mapping = plan.model_mapping()
    if mapping:
        _json(base / "model_mapping.json", mapping)

    for job in plan.jobs:
        scenario_dir = base / "results" / job.system / job.benchmark / job.scenario
        # repeats: N - the repeat packaged_repeat names (1, the performance run, by default).
        perf = Path(plan.packaged_run_dir(job.system, job.benchmark, job.scenario))
        acc = Path(plan.run_dir(job.system, job.benchmark, job.scenario, "accuracy"))
        acc_eval = Path(plan.accuracy_dir(job.system, job.benchmark, job.scenario))
        _copy(Path(plan.user_conf_path(job.system, job.benchmark, job.scenario)), scenario_dir / "user.conf")
        _json(scenario_dir / "measurements.json", measurements(plan, job.benchmark))
        for name in LOG_FILES + (ACCURACY_LOG,):
            _copy(perf / name, scenario_dir / "performance" / "run_1" / name)
        for name in LOG_FILES:
            _copy(acc / name, scenario_dir / "accuracy" / name)
        digest = write_truncated_log(acc / ACCURACY_LOG, scenario_dir / "accuracy" / ACCURACY_LOG)
        accuracy_txt = (acc_eval / "accuracy.txt").read_text()
        (scenario_dir / "accuracy" / "accuracy.txt").write_text(accuracy_txt + hash_line(digest))
        extras = acc_eval / "extras"
        if extras.is_dir():  # the evaluator's outputs the round wants beside accuracy.txt
            # Snakemake's .snakemake_timestamp in a directory output is no file of the result.
            shutil.copytree(extras, scenario_dir / "accuracy", dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*"))
        verdict = json.loads((acc_eval / "accuracy.json").read_text())
        (scenario_dir / "README.md").write_text(
            scenario_readme(plan, job, read_detail(perf / "mlperf_log_detail.txt"), verdict)
        )
        _json(scenario_dir / "provenance.json", _scenario_provenance(plan, job, perf, acc))
        for test in plan.compliance_tests(job.benchmark):
            _copy_compliance(
                Path(plan.compliance_dir(job.system, job.benchmark, job.scenario, test)), scenario_dir / test
            )
    policy = (plan.config.get("package") or {}).get("failed_results", "exclude")
    failed = apply_failure_policy(root, plan.rules, plan.division, plan.submitter, policy)
    # Outside the tree: what the check failed and what the policy did, for the summary.
    (root.parent / "failed_results.json").write_text(json.dumps({"policy": policy, "failed": failed}, indent=2) + "\n")
    return root


def _scenario_provenance(plan: Plan, job, perf: Path, acc: Path) -> dict[str, Any]:
    """What produced this result, for reviewers and for ``compare``: the runs' provenance
    (host, packages, engine settings, environment, input hashes, user.conf) and the FP4
    recipe. An extra file in the scenario folder, which the checkers allow."""
    bench = plan.benchmark_cfg(job.benchmark)
    record: dict[str, Any] = {
        "system": job.system,
        "benchmark": job.benchmark,
        "scenario": job.scenario,
        "mlperf_benchmark": bench["mlperf_benchmark"],
        "model": bench["model"],
        "dataset": bench["dataset"],
    }
    for mode, run_dir in (("performance", perf), ("accuracy", acc)):
        path = run_dir / "provenance.json"
        record[mode] = json.loads(path.read_text()) if path.is_file() else None
    repeats = plan.repeats(job.system, job.benchmark, job.scenario)
    if repeats > 1:  # which of the scenario's repeated performance runs this tree holds
        record["performance_repeat"] = {
            "packaged": plan.packaged_repeat(job.system, job.benchmark, job.scenario),
            "of": repeats,
        }
    recipe = bench.get("quantization")
    if recipe:
        manifest_path = Path(plan.quantized_dir(bench["model"], recipe)) / "quant_manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
        record["quantization"] = {
            "recipe": recipe,
            "settings": plan.config["quantization"][recipe],
            "codec_version": manifest.get("codec_version"),
            "scheme": manifest.get("scheme"),
            "software": manifest.get("software"),
            # What a partner's checkpoint may differ by besides the recipe: where it was
            # quantized and on which calibration rows (compare names both).
            "device": manifest.get("device"),
            "calibration": manifest.get("calibration"),
            "logit_error": manifest.get("logit_error"),
            "video_error": (manifest.get("video_error") or {}).get("served"),
            "manifest_sha256": sha256_file(manifest_path) if manifest_path.is_file() else None,
        }
    return record


def _copy_compliance(verdict_dir: Path, dest: Path) -> None:
    """The checker's files only: verify_*.txt, accuracy/, performance/ (not our verdict.json)."""
    if not verdict_dir.is_dir():
        raise UserError(f"{verdict_dir} is missing; rerun the compliance stage")
    dest.mkdir(parents=True)
    for path in sorted(verdict_dir.glob("verify_*.txt")):
        shutil.copyfile(path, dest / path.name)
    for sub in ("accuracy", "performance"):
        if (verdict_dir / sub).is_dir():
            shutil.copytree(verdict_dir / sub, dest / sub, ignore=IGNORED)
