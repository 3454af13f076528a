"""One real LoadGen test (accuracy mode: every sample once, its answer logged) through a SPLIT
head against SIMULATED endpoints, with a fault injected mid-run.

    python split_head_child.py CONFIG_JSON

CONFIG_JSON: {"out", "scenario", "ports", "workers", "samples", "qps", "kill_worker_after"}.
``kill_worker_after`` (answers): SIGKILL dispatch worker 0 once the head has read that many
answers (a real process killed, as an OOM kill or a crash would). Prints ``RESULT {json}``:
the run record, every id the head passed to LoadGen with how often, and the worker killed.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections import Counter
from pathlib import Path

from mlperf_repro.backends import GenerationSettings
from mlperf_repro.backends.dispatcher import DispatchSettings, EndpointSpec
from mlperf_repro.backends.split_head import SplitEndpointBackend
from mlperf_repro.harness.dataset import TokenDataset
from mlperf_repro.harness.run import LoadgenTest, run_loadgen_test

MAX_NEW = 20


def prompts(n: int) -> list[list[int]]:
    return [[3 + i, 5 + 2 * i, 7, 11 + i % 5] for i in range(n)]


def main(cfg_path: str) -> None:
    cfg = json.loads(Path(cfg_path).read_text())
    out, scenario = Path(cfg["out"]), cfg["scenario"]
    dataset = TokenDataset(prompts=prompts(cfg["samples"]), references=[""] * cfg["samples"])
    conf = out.parent / f"{out.name}.user.conf"
    conf.write_text(
        f"llama2-70b.{scenario}.target_qps = {cfg['qps']}\n"
        f"llama2-70b.{scenario}.performance_sample_count_override = {cfg['samples']}\n"
    )
    reported: Counter = Counter()
    firsts: Counter = Counter()
    killed: list[int] = []
    lock = threading.Lock()

    def factory(sut):
        def on_first(batch):
            firsts.update(qid for qid, _ in batch)
            sut.first_tokens(batch)

        def on_completions(batch):
            with lock:
                reported.update(qid for qid, _ in batch)
                if cfg.get("kill_worker_after") and not killed and sum(reported.values()) >= cfg["kill_worker_after"]:
                    worker = backend.workers[0]
                    killed.append(worker.proc.pid)
                    worker.proc.send_signal(signal.SIGKILL)
            sut.completions(batch)

        backend = SplitEndpointBackend(
            endpoints=[EndpointSpec(f"ep{i}", "127.0.0.1", p, max_concurrency=8) for i, p in enumerate(cfg["ports"])],
            dispatch=DispatchSettings(
                model="sim", stall_timeout_s=2, probe_interval_s=0.2, down_grace_s=5, warm_connections=4
            ),
            generation=GenerationSettings(max_new_tokens=MAX_NEW),
            stream=scenario != "Offline",
            on_first_tokens=on_first if scenario != "Offline" else None,
            on_completions=on_completions,
            workers=cfg["workers"],
        )
        return backend

    test = LoadgenTest(
        user_conf=conf,
        loadgen_model="llama2-70b",
        loadgen_scenario=scenario,
        mode="accuracy",
        out_dir=out,
        performance_sample_count=cfg["samples"],
    )
    record = run_loadgen_test(test, dataset, factory)
    print(
        "RESULT "
        + json.dumps(
            {
                "record": record,
                "reported": {str(k): v for k, v in reported.items()},
                "firsts": {str(k): v for k, v in firsts.items()},
                "killed": killed,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1])
