"""Run one real LoadGen test in this process with a scripted backend (a stand-in for the
inference engine, not for the harness under test): each request is answered after a
short delay with tokens derived from its prompt, first token first.

    python harness_child.py <out_dir> <Offline|Server> <performance|accuracy> <tokens per answer> [fail]

With ``fail`` the engine raises after answering a few requests, as a crashed engine would.
Environment: HARNESS_MODEL (LoadGen model name, default llama2-70b), HARNESS_CONF (extra
user.conf lines), HARNESS_AUDIT (audit.config text: a compliance run). HARNESS_LOG (a path):
run as a workflow job does, through ``mlperf_repro.stage.run`` with its output in that log and
the config's ``progress`` section from HARNESS_PROGRESS (JSON). HARNESS_ENDPOINT (a port):
serve through the endpoints backend (a SIMULATED endpoint on that port) instead.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from mlperf_repro.harness.dataset import TokenDataset
from mlperf_repro.harness.run import LoadgenTest, run_loadgen_test


class EngineCrashed(RuntimeError):
    pass


class ScriptedBackend:
    def __init__(self, sut, answer_tokens: int, stream: bool, fail: bool = False) -> None:
        self.sut = sut
        self.answer_tokens = answer_tokens
        self.stream = stream
        self.fail = fail
        self.threads: list[threading.Thread] = []
        self.crashed = threading.Event()

    def start(self) -> None:
        pass

    def submit(self, requests) -> None:
        for request in requests:
            thread = threading.Thread(target=self._answer, args=(request,))
            thread.start()
            self.threads.append(thread)

    def _answer(self, request) -> None:
        if self.fail and request.request_id % 3 == 0:
            self.crashed.set()
            return
        tokens = [(sum(request.prompt_token_ids) + i) % 1000 + 3 for i in range(self.answer_tokens)]
        time.sleep(0.002)
        if self.stream:
            self.sut.first_tokens([(request.request_id, tokens[0])])
        time.sleep(0.002)
        self.sut.completions([(request.request_id, tokens)])

    def serve_until(self, done: threading.Event) -> None:
        while not done.wait(0.01):
            if self.crashed.is_set():
                raise EngineCrashed("scripted engine failure")
        for thread in self.threads:
            thread.join()

    def stop(self) -> None:
        pass


def endpoint_backend(sut, port: int, stream: bool):
    from mlperf_repro.backends import GenerationSettings
    from mlperf_repro.backends.dispatcher import DispatchSettings, EndpointSpec
    from mlperf_repro.backends.endpoints import EndpointBackend

    return EndpointBackend(
        endpoints=[EndpointSpec("ep0", "127.0.0.1", port)],
        # Long timeouts: a hanging endpoint is waited for (the progress watchdog's case).
        dispatch=DispatchSettings(model="sim", stall_timeout_s=300, down_grace_s=300, warm_connections=4),
        generation=GenerationSettings(max_new_tokens=8),
        stream=stream,
        on_first_tokens=sut.first_tokens if stream else None,
        on_completions=sut.completions,
    )


def main(_smk=None) -> None:
    out_dir, scenario, mode, answer_tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    fail = sys.argv[5:] == ["fail"]
    model = os.environ.get("HARNESS_MODEL", "llama2-70b")
    dataset = TokenDataset(prompts=[[1, 2, i, i + 1] for i in range(32)], references=[""] * 32)
    conf = Path(out_dir).parent / f"{Path(out_dir).name}.user.conf"
    conf.write_text(
        f"{model}.{scenario}.target_qps = 200\n{model}.{scenario}.min_duration = 200\n"
        f"{model}.{scenario}.min_query_count = 64\n"
        f"{model}.{scenario}.performance_sample_count_override = 32\n" + os.environ.get("HARNESS_CONF", "")
    )
    test = LoadgenTest(
        user_conf=conf,
        loadgen_model=model,
        loadgen_scenario=scenario,
        mode=mode,
        out_dir=Path(out_dir),
        performance_sample_count=32,
        audit_config=os.environ.get("HARNESS_AUDIT"),
    )
    port = os.environ.get("HARNESS_ENDPOINT")
    if port:
        factory = lambda sut: endpoint_backend(sut, int(port), scenario != "Offline")  # noqa: E731
    else:
        factory = lambda sut: ScriptedBackend(sut, answer_tokens, scenario != "Offline", fail)  # noqa: E731
    try:
        record = run_loadgen_test(test, dataset, factory)
    except EngineCrashed as exc:
        print(f"CRASHED {exc}")
        return
    print("RECORD " + json.dumps(record))


if __name__ == "__main__":
    if os.environ.get("HARNESS_LOG"):
        from types import SimpleNamespace

        from mlperf_repro.stage import run

        job = SimpleNamespace(
            log=[os.environ["HARNESS_LOG"]],
            rule="loadgen_run",
            config={"progress": json.loads(os.environ.get("HARNESS_PROGRESS", "{}"))},
        )
        run(job, main)
    else:
        main()
