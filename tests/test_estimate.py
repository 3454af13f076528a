"""The plan view: numbers for real configs checked against arithmetic done by hand, job
counts checked against Snakemake's own dry-run DAG, and bad input reported as a UserError."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from conftest import (
    DEFAULT_CONFIG,
    REPO,
    SCHEMA,
    llama2_part,
    make_workdir,
    model_load_per_run,
    run_snakemake,
    slow_after,
)
from test_dag import job_counts

from mlperf_repro.cli import main as cli_main
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import estimate_file, estimate_plan

EXAMPLES = sorted((REPO / "config" / "examples").glob("*.yaml"))
MI355X = REPO / "config" / "examples" / "mi355x-llama2-70b.yaml"


def stage(estimate, name):
    return next(r for r in estimate.rows if r.stage == name)


def llama2_part_of_default_config(tmp_path):
    """The default config without its text-to-video benchmark (tests/test_wan_task.py and
    test_estimate_wan.py price that part)."""
    config = llama2_part(load_yaml(DEFAULT_CONFIG))
    path = tmp_path / "llama2.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_default_config_by_hand(tmp_path):
    est = estimate_file(str(llama2_part_of_default_config(tmp_path)), str(SCHEMA))
    # Assumptions: run_overhead_s 30 from the config; defaults light_job_s 5, download_mb_per_s 100,
    # accuracy_eval_samples_per_s 100, dataset_bytes_per_sample 16384, log_bytes_per_run 100000,
    # package_bytes_per_result 600000, quantize_mb_per_s 50.
    # test_scale: min_duration 10 s, min_query_count Offline 256 / Server 500 / Interactive 500;
    # the builtin dataset has 256 samples.
    # The system shares one server (launch: shared): the first LoadGen process starts it (+ 30 s),
    # every later one attaches (+ 5 s, attach_overhead_s).
    # Offline is target_qps auto from start_qps 100 (margin 0.1): its pass is one short run asking
    # 1.5 x 100/s for 1.1 x 5 s (the config's find_performance.min_duration_ms) at 100/s = 8.25 s, + 30 s.
    find = stage(est, "find performance")
    assert find.jobs == {"find_performance": 1} and find.wall_s == pytest.approx(8.25 + 30)
    runs = {r.stage: r for r in est.rows if r.stage.startswith("run: ")}
    # Offline at the target the pass would choose, 100 x 1.1 = 110: max(256, int(1.1 x 10 x 110)
    # = 1210) samples, padded to whole passes over the 256 performance samples (llama2's
    # sample_concatenate_permutation) = 1280 at 100/s = 12.8 s, + 5 s.
    assert runs["run: Offline performance"].wall_s == pytest.approx(12.8 + 5)
    # Accuracy: 256 samples at 100/s = 2.56 s, + 5 s.
    assert runs["run: Offline accuracy"].wall_s == pytest.approx(256 / 100 + 5)
    # Server: max(10 x 50, 500) queries padded to 2 x 256 = 512 at 50 qps = 10.24 s, + 5 s.
    assert runs["run: Server performance"].wall_s == pytest.approx(512 / 50 + 5)
    assert runs["run: Server accuracy"].wall_s == pytest.approx(256 / 50 + 5)
    # Interactive: 512 queries at 30 qps = 17.067 s, + 5 s.
    assert runs["run: Interactive performance"].wall_s == pytest.approx(512 / 30 + 5)
    assert runs["run: Interactive accuracy"].wall_s == pytest.approx(256 / 30 + 5)
    # TEST06's audit.config: min_duration 0, min_query_count 100 -> Offline 100 samples / 100,
    # Server 100 / 50, Interactive 100 / 30, each + 5 s; three verifications at 5 s.
    compliance = stage(est, "compliance")
    assert compliance.jobs == {"compliance_run": 3, "compliance_verify": 3}
    assert compliance.wall_s == pytest.approx(100 / 100 + 100 / 50 + 100 / 30 + 3 * 5 + 3 * 5)
    # 10 LoadGen processes (a find-performance run, 6 runs, 3 compliance runs), one model load: 9 x (30 - 5) s saved.
    assert any(
        "model loads of cpu-2c-vllm: 1 for its 10 LoadGen processes (launch: shared); saves 0:03:45" in n
        for n in est.notes
    )
    # Reference accuracy (measured target), in the job's own vLLM: 256 samples at the Offline 100/s + 30 s; three
    # evaluations of 5 s + 256 / 100 samples/s.
    assert stage(est, "accuracy").wall_s == pytest.approx(256 / 100 + 30 + 3 * (5 + 2.56))  # 55.24 s
    # The shipped tiny-llama (artifacts/models, file://) at 100 MB/s; the builtin dataset 5 s.
    shipped = sum(p.stat().st_size for p in (REPO / "artifacts/models/tiny-llama").iterdir())
    assert stage(est, "acquire").wall_s == pytest.approx(shipped / 100e6 + 5)
    # tarball, check, summary, official summary, report plots, one light job each.
    assert stage(est, "package, check, report").wall_s == pytest.approx(5 * 5 + 5)

    # Disk. tiny-llama as shipped, read from its safetensors headers (hidden 192, intermediate
    # 512, 3 layers, 3 heads of 64, 3 KV heads, the trained tokenizer's 937 tokens): linear =
    # 3 x (4 x 192 x 192 + 3 x 192 x 512) = 1,327,104; total 1,688,256 parameters; the folder's bytes.
    acquire = stage(est, "acquire")
    assert (acquire.details[0]["parameters"], acquire.details[0]["disk_bytes"]) == (1_688_256, shipped)
    assert acquire.disk_bytes == shipped + 256 * 16384  # + dataset 4,194,304
    # MXFP4: 1,327,104 x 0.53125 = 705,024 + (361,152 other parameters x 2 = 722,304) = 1,427,328,
    # plus the dequantized bf16 copy (the checkpoint's bytes).
    assert stage(est, "quantize").disk_bytes == 1_427_328 + shipped
    # Accuracy log: 256 samples x (100 + 8 x (294.45 + 1)) = 256 x 2463.6 = 630,681.6 bytes.
    assert runs["run: Offline accuracy"].disk_bytes == pytest.approx(100_000 + 630_681.6)
    assert compliance.disk_bytes == pytest.approx(3 * (100_000 + 100 * 2463.6))

    total = est.total
    assert total["jobs"] == 29  # with report_plots
    assert total["gpu_hours"] == 0  # a CPU system
    expected_wall = (
        shipped / 100e6
        + 5
        + shipped / 50e6
        + 3 * 5  # acquire, quantize, user.conf
        + 38.25  # find performance (it starts the shared server)
        + 17.8
        + 256 / 100
        + 5
        + 512 / 50
        + 5
        + 256 / 50
        + 5
        + 512 / 30
        + 5
        + 256 / 30
        + 5  # runs: 86.32
        + 55.24
        + 36.33333
        + 30
    )  # accuracy, compliance, package (with the report's plots)
    assert total["wall_s"] == pytest.approx(expected_wall, rel=1e-5)  # ~266 s
    expected_disk = (
        shipped
        + 4_194_304
        + 1_427_328
        + shipped
        + 100_000  # the find-performance run's logs
        + 3 * 100_000
        + 3 * (100_000 + 630_681.6)
        + 3 * (100_000 + 246_360)
        + 3 * 600_000
    )
    assert total["disk_bytes"] == pytest.approx(expected_disk)


def mi355x_loading_per_run() -> dict:
    """The imported example with a model load per LoadGen process (launch: slurm), the arithmetic
    below; as imported (slurm-shared) only its first process loads."""
    example = load_yaml(MI355X)
    (system,) = example["systems"].values()
    assert system["engine"]["endpoints"]["launch"] == "slurm-shared"
    system["engine"]["endpoints"]["launch"] = "slurm"
    return validate_config(example, SCHEMA)


def test_mi355x_llama2_70b_by_hand():
    est = estimate_plan(mi355x_loading_per_run())
    # The vendor's published settings (imported): Offline 370/s for 3,600 s, Server 360/s for 1,800 s,
    # Interactive 263/s for the round's 600 s; Offline min_query_count 24,576 (offline_min_samples_per_query);
    # 8 servers of one MI355X on one node; every estimate assumption at its default (run_overhead_s 120).
    runs = {r.stage: r for r in est.rows if r.stage.startswith("run: ")}
    # Offline at 370/s: max(24,576, 1.1 x 3,600 x 370 = 1,465,200) samples (the vendor's log says
    # effective_samples_per_query 1,465,200), which LoadGen pads to whole passes over the 24,576
    # performance samples (sample_concatenate_permutation): 60 x 24,576 = 1,474,560 = 3,985.3 s, + 120 s.
    offline_s = 1_474_560 / 370 + 120
    assert runs["run: Offline performance"].wall_s == pytest.approx(offline_s)
    assert runs["run: Offline performance"].gpu_hours == pytest.approx(offline_s * 8 / 3600)  # 9.123 GPU-h
    # Accuracy: all 24,576 samples at 370/s = 66.42 s, + 120 s.
    assert runs["run: Offline accuracy"].wall_s == pytest.approx(24576 / 370 + 120)
    # Server at 360/s: max(1,800 x 360, 100) = 648,000 queries, padded to 27 x 24,576 = 663,552 =
    # 1,843.2 s, + 120 s; accuracy 24,576 / 360 s + 120 s.
    server_s = 663_552 / 360 + 120
    assert runs["run: Server performance"].wall_s == pytest.approx(server_s)
    assert runs["run: Server accuracy"].wall_s == pytest.approx(24576 / 360 + 120)
    # Interactive at 263/s: 600 x 263 = 157,800 queries -> 7 x 24,576 = 172,032 = 654.1 s, + 120 s;
    # accuracy 24,576 / 263 s + 120 s.
    interactive_s = 172_032 / 263 + 120
    assert runs["run: Interactive performance"].wall_s == pytest.approx(interactive_s)
    assert runs["run: Interactive accuracy"].wall_s == pytest.approx(24576 / 263 + 120)
    run_seconds = offline_s + 24576 / 370 + 120 + server_s + 24576 / 360 + 120 + interactive_s + 24576 / 263 + 120
    assert sum(r.gpu_hours for r in runs.values()) == pytest.approx(run_seconds * 8 / 3600)  # 16.02 GPU-h
    # TEST06: 100 queries at 370, 360 and 263 qps, each + 120 s, on 8 GPUs.
    compliance = stage(est, "compliance")
    compliance_seconds = 100 / 370 + 100 / 360 + 100 / 263 + 3 * 120
    assert compliance.gpu_hours == pytest.approx(compliance_seconds * 8 / 3600)
    assert compliance.wall_s == pytest.approx(compliance_seconds + 3 * 5)
    # Reference targets: no reference_accuracy run; three evaluations of 5 + 24,576 / 100 s.
    assert stage(est, "accuracy").jobs == {"accuracy_eval": 3}
    assert stage(est, "accuracy").wall_s == pytest.approx(3 * 250.76)
    # Acquire: Llama-2-70b-chat-hf, model_bytes 137,953,316,864 at 100 MB/s = 1379.53 s; the
    # dataset 24,576 x 16,384 = 402,653,184 bytes = 4.03 s; the calibration set's 1,000 rows
    # (the vendor recipe's calibration.samples) x 16,384 = 16,384,000 bytes = 0.16 s.
    acquire = stage(est, "acquire")
    assert acquire.wall_s == pytest.approx(137_953_316_864 / 1e8 + 402_653_184 / 1e8 + 16_384_000 / 1e8)
    assert acquire.disk_bytes == 137_953_316_864 + 402_653_184 + 16_384_000
    # Quantize at 50 MB/s: 2759.07 s. MXFP4: 68,451,041,280 linear parameters x 0.53125 =
    # 36,364,615,680 bytes; the other 525,606,912 parameters (embeddings, lm_head, norms) in bf16 =
    # 1,051,213,824 bytes; 37,415,829,504 bytes in all, plus the dequantized bf16 copy.
    quantize = stage(est, "quantize")
    assert quantize.wall_s == pytest.approx(137_953_316_864 / 50e6)
    assert quantize.details[0]["fp4_bytes"] == 37_415_829_504
    assert quantize.disk_bytes == 37_415_829_504 + 137_953_316_864
    # Quark's AutoSmoothQuant with MXFP4 runs on a GPU only: the job holds one (device: gpu).
    assert quantize.details[0]["accelerators"] == 1 and quantize.details[0]["device"] == "gpu"
    assert quantize.gpu_hours == pytest.approx(quantize.wall_s / 3600)  # 0.766 GPU-h
    # Accuracy logs: 24,576 x (100 + 8 x 295.45) = 60,545,433.6 bytes per accuracy run.
    assert runs["run: Server accuracy"].disk_bytes == pytest.approx(100_000 + 60_545_433.6)

    # The example does not enable gpu_screening: no screen job (test_screen covers it).
    assert not any(r.stage == "screen GPUs" for r in est.rows)
    screen_seconds = 0
    total = est.total
    assert total["gpu_hours"] == pytest.approx(
        (run_seconds + compliance_seconds + screen_seconds) * 8 / 3600 + quantize.wall_s / 3600
    )
    expected_wall = (
        1379.53316864
        + 4.02653184
        + 0.16384
        + 2759.06633728
        + 15
        + run_seconds
        + 752.28
        + compliance_seconds
        + 15
        + 30
        + screen_seconds
    )
    assert total["wall_s"] == pytest.approx(expected_wall)  # 8822.3 s, ~2.45 h
    assert total["disk_bytes"] == pytest.approx(
        137_953_316_864
        + 402_653_184
        + 16_384_000
        + 37_415_829_504
        + 137_953_316_864
        + 3 * 100_000
        + 3 * (100_000 + 60_545_433.6)
        + 3 * (100_000 + 246_360)
        + 3 * 600_000
    )


def test_mi355x_llama2_70b_as_imported_loads_the_model_once():
    """As imported (slurm-shared): the 9 LoadGen processes (6 runs, 3 TEST06) load the model once
    (run_overhead_s 120); the other 8 attach (attach_overhead_s 5)."""
    per_run = estimate_plan(mi355x_loading_per_run())
    shared = estimate_file(str(MI355X), str(SCHEMA))
    saved = 8 * (120 - 5)
    assert per_run.total["wall_s"] - shared.total["wall_s"] == pytest.approx(saved)
    assert per_run.total["gpu_hours"] - shared.total["gpu_hours"] == pytest.approx(saved * 8 / 3600)
    assert any("1 for its 9 LoadGen processes (launch: slurm-shared)" in n for n in shared.notes)


@pytest.mark.slow
@pytest.mark.parametrize("path", slow_after([DEFAULT_CONFIG, *EXAMPLES]), ids=lambda p: p.name)
def test_jobs_match_the_dag(tmp_path, path):
    """Every config: the plan view runs, and its jobs per rule are Snakemake's dry-run DAG."""
    est = estimate_file(str(path), str(SCHEMA))
    work = make_workdir(tmp_path)
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", str(path), timeout=120)
    assert result.returncode == 0, result.stderr
    dag = job_counts(result.stdout)
    dag.pop("all")
    assert est.rule_counts() == dag
    # The table and the JSON tell the same totals.
    data = json.loads(est.to_json())
    assert data["total"]["jobs"] == sum(dag.values())
    assert data["rules"] == dag
    assert est.render().splitlines()[-len(est.assumptions) - len(est.notes) - 3].startswith("total")


def test_gpu_hours_follow_nodes_and_screening(default_config):
    """Two nodes of 4 GPUs double nothing but the accelerators; screening adds its job."""
    config = model_load_per_run(copy.deepcopy(default_config))  # vLLM in the run job, on its GPUs
    system = config["systems"]["cpu-2c-vllm"]
    system["description"].update(number_of_nodes=2, accelerators_per_node=4, accelerator_model_name="X")
    system["gpu_screening"] = {"enabled": True}
    est = estimate_plan(validate_config(config, SCHEMA))
    offline = next(r for r in est.rows if r.stage == "run: Offline performance")
    assert offline.gpu_hours == pytest.approx(42.8 * 8 / 3600)  # 12.8 s at the auto target + 30 s
    # The find-performance pass occupies them as well: 8.25 s + 30 s.
    assert stage(est, "find performance").gpu_hours == pytest.approx(38.25 * 8 / 3600)
    screen = stage(est, "screen GPUs")
    assert screen.jobs == {"screen_gpus": 1}
    assert screen.gpu_hours == pytest.approx(60 * 8 / 3600)


def test_assumptions_name_their_source(capsys):
    assert cli_main(["plan", "--configfile", str(DEFAULT_CONFIG)]) == 0
    out = capsys.readouterr().out
    assert "30 s (config key estimate.run_overhead_s)" in out
    assert "5 s (default of estimate.light_job_s)" in out
    assert cli_main(["plan", "--configfile", str(MI355X), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    sources = {a["key"]: a["source"] for a in data["assumptions"]}
    assert sources["run_overhead_s"] == "default of estimate.run_overhead_s"


def test_bad_configs_are_user_errors(tmp_path, capsys):
    missing = tmp_path / "missing.yaml"
    assert cli_main(["plan", "--configfile", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err
    config = load_yaml(DEFAULT_CONFIG)
    config["estimate"]["run_overhead_s"] = -1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    assert cli_main(["plan", "--configfile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "estimate.run_overhead_s: must be >= 0" in err and "Traceback" not in err
    bad.write_text("- just\n- a list\n")
    assert cli_main(["plan", "--configfile", str(bad)]) == 2
    assert "mapping" in capsys.readouterr().err
    with pytest.raises(UserError, match="not validated"):
        estimate_plan(load_yaml(DEFAULT_CONFIG) | {"estimate": {}})


def test_multinode_scaling_study_by_hand():
    est = estimate_file(str(REPO / "config/examples/multinode-local.yaml"), str(SCHEMA))
    scaling = stage(est, "scaling study")
    # Offline on 1 and 2 of the 2 servers, target_qps 150 scaled by n/2: n=1 at 75/s issues
    # max(256, int(1.1 x 10 x 75) = 825) samples, padded to whole passes over the 256 performance
    # samples (sample_concatenate_permutation) = 1024 in 13.65 s; n=2 at 150/s 1650 -> 1792
    # samples in 11.95 s; each + the default 120 s; two user.confs and the report at 5 s.
    assert scaling.jobs == {"scaling_user_conf": 2, "scaling_run": 2, "scaling_report": 1}
    runs = [d for d in scaling.details if d["rule"] == "scaling_run"]
    assert [d["queries"] for d in runs] == [1024, 1792]
    assert scaling.wall_s == pytest.approx(1024 / 75 + 1792 / 150 + 2 * 120 + 3 * 5)  # 280.6 s
    assert scaling.gpu_hours == 0 and scaling.disk_bytes == 2 * 100_000


@pytest.mark.slow
@pytest.mark.parametrize("acquired", [False, True], ids=["fresh", "after-acquire"])
def test_the_workflow_target_writes_the_same_plan(tmp_path, monkeypatch, acquired):
    """The plan view reads checkpoints in the workflow's folder (tensor headers size the
    quantize job): the expected plan is computed in the same folder, never in the checkout,
    whose state (a default run acquired models there) is not the test's. The default's models
    are file:// sources, read where they lie: acquiring them changes nothing in the plan."""
    work = make_workdir(tmp_path)
    if acquired:
        from mlperf_repro.fetch.entries import acquire_model_entry

        entry = load_yaml(DEFAULT_CONFIG)["models"]["tiny-wan"]
        acquire_model_entry(entry, work / "resources/models/tiny-wan", work / "results/acquire/models/tiny-wan.json")
    result = run_snakemake(work, "-c1", "plan_view", timeout=300)
    assert result.returncode == 0, result.stderr
    monkeypatch.chdir(work)
    expected = estimate_file("config/config.yaml", str(SCHEMA))
    quantize = next(row for row in expected.rows if row.stage == "quantize")
    wan = next(d for d in quantize.details if d.get("model") == "tiny-wan")
    assert wan["mem_from"].endswith("checkpoint at its file:// source")
    assert (work / "results/plan/plan.txt").read_text() == expected.render()
    assert json.loads((work / "results/plan/plan.json").read_text()) == expected.to_dict()


def test_run_lengths_per_scenario_rule():
    from mlperf_repro.estimate import Estimator

    est = Estimator(validate_config(load_yaml(DEFAULT_CONFIG), SCHEMA))
    bench = "tiny-llama-mxfp4"
    # SingleStream back to back at 1/target_qps = 20 s each: max(600 s, 100 queries x 20 s) = 2000 s
    # (100 is LoadGen's default min_query_count, from the rules table), without concatenation.
    run = est.performance_run({"target_qps": 0.05, "sample_concatenate_permutation": 0}, "SingleStream", bench)
    assert (run["queries"], run["seconds"]) == (100, pytest.approx(2000))
    # With llama2's sample_concatenate_permutation (mlperf.conf): max(100, 2 x 600 x 5 = 6000)
    # queries, up to the next multiple of the 24,576 performance samples.
    run = est.performance_run({"target_qps": 5}, "SingleStream", bench)
    assert run["queries"] == 24576 and run["seconds"] == pytest.approx(24576 / 5)
    # Server: 600 s x 50 = 30,000 arrivals, padded to 2 x 24,576 (the Interactive run of issue 33).
    run = est.performance_run({"target_qps": 50}, "Interactive", bench)
    assert run["queries"] == 49152 and run["seconds"] == pytest.approx(49152 / 50)
    # max_duration caps a Server run: 600 s asked, 300 s allowed.
    run = est.performance_run({"target_qps": 10, "max_duration": 300000}, "Server", bench)
    assert run["seconds"] == pytest.approx(300)
    # max_query_count caps Offline: max(24,576, 1.1 x 600 x 100) = 66,000 samples, capped at 10,000 = 100 s.
    run = est.performance_run({"target_qps": 100, "max_query_count": 10000}, "Offline", bench)
    assert (run["queries"], run["seconds"]) == (10000, pytest.approx(100))
    # An audit.config without min_duration (TEST04) keeps the run's own; min_query_count 20 changes nothing.
    run = est.performance_run(
        {"target_qps": 0.05, "sample_concatenate_permutation": 0}, "SingleStream", bench, audit={"min_query_count": 20}
    )
    assert run["seconds"] == pytest.approx(600)
