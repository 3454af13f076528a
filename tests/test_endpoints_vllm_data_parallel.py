"""vLLM's own data-parallel deployment as ONE endpoint: a REAL ``vllm serve
--data-parallel-size 2`` (one front end, two engine processes) on loopback, serving the demo
model; the head drives it through a single list entry and gets the in-process engine's answers.

Its own module, so the two single-engine servers of test_endpoints_vllm are stopped before
this one starts (both would not fit beside it on 2 cores).
"""

from __future__ import annotations

import re

import pytest
from sim_endpoints import free_ports
from test_endpoints_vllm import BENCH, MODEL, SERVED, SYSTEM, engine_record, record_of, run_child, token_lists

from mlperf_repro.launch.local import local_vllm_servers

pytestmark = pytest.mark.slow
DATA_PARALLEL = 2


@pytest.fixture(scope="module")
def data_parallel_server(e2e_workdir, tmp_path_factory):
    record = engine_record(e2e_workdir)
    port = free_ports(1)[0]
    env = {k: v for k, v in record["engine"]["env"].items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    env.update(OMP_NUM_THREADS="1", VLLM_CPU_KVCACHE_SPACE="1")  # two engines share 2 cores
    engine_args = dict(record["engine"]["engine_args"], data_parallel_size=DATA_PARALLEL)
    logs = tmp_path_factory.mktemp("dp-server")
    with local_vllm_servers(
        str(e2e_workdir / MODEL), SERVED, [port], engine_args, logs, env=env, startup_timeout_s=600
    ):
        yield {"ports": [port], "logs": logs, "generation": record["generation"]}


def test_a_data_parallel_front_end_is_one_endpoint_with_the_engines_answers(
    e2e_workdir, data_parallel_server, tmp_path
):
    conf = "llama2-70b.Offline.min_query_count = 64\nllama2-70b.Offline.min_duration = 0\n"
    endpoint = {
        "name": "dp-front-end",
        "host": "127.0.0.1",
        "port": data_parallel_server["ports"][0],
        "accelerator_count": DATA_PARALLEL,
        "max_concurrency": 64,
    }
    record = record_of(
        run_child(e2e_workdir, tmp_path, data_parallel_server, "Offline", "accuracy", conf, endpoints=[endpoint])[0]
    )
    ours = token_lists(tmp_path / "Offline-accuracy" / "mlperf_log_accuracy.json")
    engine = token_lists(e2e_workdir / "results/runs" / SYSTEM / BENCH / "Offline/accuracy/mlperf_log_accuracy.json")
    assert record["completed_samples"] == len(engine) and record["loadgen_errors"] == []
    assert record["backend_stats"]["endpoints"]["dp-front-end"]["completed"] == len(engine)
    differing = [i for i in engine if ours.get(i) != engine[i]]
    assert not differing, f"{len(differing)} of {len(engine)} samples differ, e.g. {differing[:5]}"
    # Both engines of the deployment were up behind the one front end.
    log = (data_parallel_server["logs"] / f"vllm-serve-{data_parallel_server['ports'][0]}.log").read_text()
    ranks = set(re.findall(r"DP rank (\d+)|DP_rank(\d+)|EngineCore_DP(\d+)", log))
    assert len({next(g for g in r if g) for r in ranks}) == DATA_PARALLEL, log[-3000:]
