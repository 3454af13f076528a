"""Entry points for the run stage: one LoadGen test, and the unquantized reference run.
``python -m mlperf_repro.stages.runs REQUEST.json`` is one LoadGen test in its own process
(:func:`loadgen_job_in_child`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import harmony, progress, provenance
from ..accuracy.open_accuracy import DIGITS
from ..backends.endpoints import serving
from ..cluster.screen import apply_to_run
from ..errors import UserError
from ..fetch import verify_dir
from ..harness.run import LoadgenTest, run_loadgen_test
from ..stage import apply_env
from ..tasks import find_evaluator, task_named
from .accuracy import score_entries


def loadgen_job(
    *,
    model_dir: str,
    dataset_dir: str,
    dataset_file: str,
    user_conf: str,
    prompt_check: dict[str, Any] | None = None,
    out_dir: str,
    loadgen_model: str,
    loadgen_scenario: str,
    mode: str,
    performance_sample_count: int,
    generation: dict[str, Any],
    engine: dict[str, Any],
    audit_config: str | None = None,
    container_image: str | None = None,
    gpu_screening: dict[str, Any] | None = None,
    task: str = "llm",
    lock_check: str | None = None,
) -> dict[str, Any]:
    """One LoadGen test; ``audit_config`` (text) makes it a compliance run; ``prompt_check``
    (Plan.prompt_check) is what the dataset file's prompts must ask for; ``container_image``
    is the image the config names for the job (recorded when the job runs inside it);
    ``gpu_screening`` (see Plan.job_screening) restricts the run to healthy GPUs;
    ``lock_check``: the record of the lock check the workflow's start wrote (provenance)."""
    apply_env(engine.get("env", {}))
    # Before any engine or server starts: they see only the GPUs the screen passed.
    allocation_screening = gpu_screening if (gpu_screening or {}).get("allocation") else None
    screened = apply_to_run(None if allocation_screening else gpu_screening, engine)
    verify_dir(dataset_dir)
    # The benchmark's task (rules table: task) reads the dataset and makes the SUT.
    served = task_named(task)
    dataset = served.read_dataset(dataset_file)
    check_prompts(dataset, dataset_file, model_dir, prompt_check)
    stream = loadgen_scenario != "Offline"
    if served.make_backend is None:
        raise UserError(f"the {served.name} task has no backend to serve it (tasks registry: make_backend)")

    def factory(sut, serving_engine):
        return served.make_backend(serving_engine, model_path=model_dir, generation=generation, stream=stream, sut=sut)

    test = LoadgenTest(
        user_conf=Path(user_conf),
        loadgen_model=loadgen_model,
        loadgen_scenario=loadgen_scenario,
        mode=mode,
        out_dir=Path(out_dir),
        performance_sample_count=performance_sample_count,
        audit_config=audit_config,
    )
    with serving(
        engine,
        model_dir,
        log_dir=Path(out_dir).parent / f"{Path(out_dir).name}.servers",
        screening=allocation_screening,
    ) as serving_engine:
        record = run_loadgen_test(test, dataset, lambda sut: factory(sut, serving_engine), served.make_sut)
    prov = provenance.collect(
        container_image=container_image,
        engine=engine,
        generation=generation,
        model_dir=model_dir,
        model_manifest_sha256=_manifest_hash(model_dir),
        dataset_file=dataset_file,
        dataset_manifest_sha256=_manifest_hash(dataset_dir),
        user_conf=Path(user_conf).read_text(),
        lock=provenance.read_lock_check(lock_check),
    )
    prov["gpu_screening"] = serving_engine.get("gpu_screening") or screened
    head = (record.get("backend_stats") or {}).get("head")
    if head:  # the LoadGen head that ran (engine.dispatch.head_workers: auto decides at run time)
        prov["head"] = {key: head[key] for key in ("workers", "tick_ms") if key in head}
    if serving_engine.get("node_facts"):  # launch: slurm: every server node's own facts
        prov["nodes"] = serving_engine["node_facts"]
    if serving_engine.get("servers"):  # launch: kubernetes: the server image (digest) and pod -> node
        prov["servers"] = provenance.stable_servers(serving_engine["servers"])
    (Path(out_dir) / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True) + "\n")
    return record


def run_arguments(smk: Any) -> dict[str, Any]:
    """The keyword arguments of :func:`loadgen_job` that every run of a job shares (a
    find-performance pass, a measurement pair), from its Snakemake ``input`` (model, dataset)
    and ``params`` (the run rules' params of the same names)."""
    params = smk.params
    return {
        "model_dir": smk.input.model,
        "dataset_dir": smk.input.dataset,
        "loadgen_model": params.loadgen_model,
        "loadgen_scenario": params.loadgen_scenario,
        "performance_sample_count": params.performance_sample_count,
        "generation": params.generation,
        "engine": params.engine,
        "container_image": params.container_image,
        "gpu_screening": params.gpu_screening,
        "task": params.task,
    }


def loadgen_job_in_child(job: dict[str, Any], request: Path) -> None:
    """:func:`loadgen_job` with the keyword arguments ``job`` in a child process of this Python:
    LoadGen keeps global state, so a job that makes several tests makes each in its own
    process. ``request`` is where the arguments are written for it; the child's output goes to
    this job's log."""
    request.parent.mkdir(parents=True, exist_ok=True)
    request.write_text(json.dumps(job, indent=2, sort_keys=True) + "\n")
    done = subprocess.run([sys.executable, "-m", __name__, str(request)], check=False)
    if done.returncode != 0:
        raise UserError(
            f"the LoadGen run into {job['out_dir']} failed (exit {done.returncode}); its output is above in this log"
        )


def check_prompts(dataset, dataset_file: str, tokenizer_dir: str, prompt_check: dict[str, Any] | None) -> None:
    """Refuse a dataset file whose prompts do not ask for the reasoning effort the round
    prescribes (gpt-oss; see :mod:`mlperf_repro.harmony`), before any engine starts. The
    prompts are read with openai-harmony over the configured vocabulary, else with the
    checkpoint's own tokenizer."""
    if not prompt_check:
        return
    if prompt_check.get("harmony_vocab"):
        decode = harmony.harmony_decoder(harmony.load_encoding(harmony.find_vocab(prompt_check["harmony_vocab"])))
    else:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        decode = lambda ids: tokenizer.batch_decode(ids, skip_special_tokens=False)  # noqa: E731
    harmony.check_prompt_efforts(
        harmony.prompt_efforts(dataset.prompts, decode), prompt_check["reasoning_effort"], dataset_file
    )


def _manifest_hash(directory: str) -> str | None:
    from ..hashing import sha256_file

    for name in ("manifest.sha256", "quant_manifest.json"):
        path = Path(directory) / name
        if path.is_file():
            return sha256_file(path)
    return None


def reference_accuracy_job(
    *,
    model_dir: str,
    dataset_dir: str,
    dataset_file: str,
    out_path: str,
    generation: dict[str, Any],
    engine: dict[str, Any],
    evaluator: str,
    outputs_dir: str | None = None,
    open_metrics: list[str] | None = None,
    container_image: str | None = None,
    gpu_screening: dict[str, Any] | None = None,
    accuracy_rules: dict[str, Any] | None = None,
    prompt_check: dict[str, Any] | None = None,
    lock_check: str | None = None,
) -> dict[str, Any]:
    """Score the unquantized model on every accuracy sample with its task's own generation in
    this process (no LoadGen: nothing is timed): vLLM's generate for the LLMs, the pipeline's
    renders for text-to-video (its videos kept in ``outputs_dir``, what the open-division
    fidelity metrics compare with). Scored by the round's evaluator, or by ``open_metrics``
    (benchmarks.<name>.open_accuracy) where the benchmark declares them; ``accuracy_rules`` is
    the benchmark's ``accuracy`` entry of the rules table; ``lock_check`` as for
    :func:`loadgen_job`."""
    apply_env(engine.get("env", {}))
    # A launch: slurm system's screen belongs to its server start, not to this in-process run.
    screened = apply_to_run(None if (gpu_screening or {}).get("allocation") else gpu_screening, engine)
    verify_dir(model_dir)
    verify_dir(dataset_dir)

    try:
        task, _ = find_evaluator(evaluator)
    except UserError as exc:
        raise UserError(f"a measured accuracy reference is not implemented: {exc}") from None
    if task.reference_outputs is None:
        raise UserError(f"a measured accuracy reference is not implemented for the {task.name} task")
    if open_metrics and task.score_open is None:
        raise UserError(f"the {task.name} task has no open-division metrics (open_accuracy)")
    outputs = Path(outputs_dir) if outputs_dir else Path(out_path).with_name("outputs")
    if outputs.exists():
        shutil.rmtree(outputs)  # a rerun's videos only
    outputs.mkdir(parents=True)

    dataset = task.read_dataset(dataset_file)
    check_prompts(dataset, dataset_file, model_dir, prompt_check)
    started = time.time()
    with progress.Progress(
        f"reference accuracy {Path(model_dir).name}",
        total=len(dataset.prompts),
        unit="samples",
        waiting_for="the unquantized model (loading, then generating)",
    ) as reporter:
        entries, tokenizer = task.reference_outputs(
            model_dir, dataset, generation=generation, engine=engine, out_dir=outputs, reporter=reporter
        )
    if open_metrics:
        # Against its own videos: the fidelity metrics' unquantized values (SSIM 1.0).
        scored = task.score_open(entries, list(open_metrics), outputs, accuracy_rules or {})
        result = {m: None if scored[m] is None else round(scored[m], DIGITS) for m in open_metrics}
    else:
        result, _ = score_entries(evaluator, entries, dataset_file, tokenizer, accuracy_rules or {})
    record = {
        "model_dir": model_dir,
        "samples": len(entries),
        "metrics": result,
        "seconds": round(time.time() - started, 1),
        "provenance": dict(
            provenance.collect(
                container_image=container_image,
                engine=engine,
                generation=generation,
                lock=provenance.read_lock_check(lock_check),
            ),
            gpu_screening=screened,
        ),
    }
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


if __name__ == "__main__":
    try:
        loadgen_job(**json.loads(Path(sys.argv[1]).read_text()))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
