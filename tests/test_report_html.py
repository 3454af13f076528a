"""The HTML report (`snakemake --report`): its plots and pages from a finished run, and the
report rendered in a real browser (Debian's chromium, headless)."""

from __future__ import annotations

import base64
import copy
import io
import re
import shutil
import subprocess

import pytest
from conftest import E2E_CONFIG, make_workdir, run_snakemake
from PIL import Image, ImageStat

from mlperf_repro.config import load_yaml
from mlperf_repro.plan import Plan
from mlperf_repro.report import pages, plots
from mlperf_repro.report.items import CATEGORIES, report_items


def image_facts(data: bytes) -> dict:
    """Size, per-channel standard deviation and the share of the most common colour."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    small = image.resize((200, max(1, 200 * image.height // image.width)))
    colours = small.getcolors(maxcolors=small.width * small.height)
    dominant = max(count for count, _ in colours) / (small.width * small.height)
    return {"size": image.size, "stddev": max(ImageStat.Stat(image).stddev), "dominant": dominant}


def assert_real_plot(data: bytes, name: str) -> None:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG"
    facts = image_facts(data)
    width, height = facts["size"]
    assert width >= 500 and height >= 300, f"{name}: {facts['size']} too small to read"
    assert facts["stddev"] > 20, f"{name} is a blank canvas ({facts})"
    assert facts["dominant"] < 0.97, f"{name} is nearly one colour ({facts})"


def detail(**extra):
    """A detail log as read_detail returns it: a Server run with token latencies."""
    values = {
        "effective_target_qps": 50,
        "result_scheduled_samples_per_sec": 49.9,
        "result_completed_samples_per_sec": 34.2,
        "result_completed_tokens_per_second": 873.5,
        "result_token_throughput_with_loadgen_overhead": 1273.4,
        "effective_min_duration_ms": 3000,
        "result_query_count": 512,
        "result_validity": "INVALID",
        "result_min_latency_ns": 4.7e9,
        "result_mean_latency_ns": 8.8e9,
        "result_max_latency_ns": 13.4e9,
        "result_first_token_mean_latency_ns": 3.2e9,
        "result_first_token_max_latency_ns": 7.0e9,
        "result_time_to_output_token_mean": 2.35e8,
        "result_time_to_output_token_max": 4.78e8,
    }
    for i, p in enumerate(plots.PERCENTILES):
        values[f"result_{p}_percentile_latency_ns"] = (9 + i) * 1e9
        values[f"result_first_token_{p}_percentile_latency_ns"] = (4 + 0.5 * i) * 1e9
        values[f"result_time_per_output_token_{p}_percentile_ns"] = (280 + 40 * i) * 1e6
    values.update(extra)
    return values


def test_latency_quantiles_from_the_detail_log():
    stats = plots.latency_quantiles(detail(), "ttft")
    assert stats["percentiles"][50.0] == pytest.approx(4000.0)
    assert stats["percentiles"][99.9] == pytest.approx(6500.0)
    assert stats["mean"] == pytest.approx(3200.0) and stats["max"] == pytest.approx(7000.0)
    assert plots.latency_quantiles({"result_validity": "VALID"}, "tpot") == {}


# A scenario's repeats as report.summary.repeat_spread gives them (three runs, the second not VALID).
SPREAD = {
    "unit": "Tokens/s",
    "packaged_repeat": 1,
    "runs": [
        {"repeat": 1, "result": 812.0, "loadgen_validity": "VALID"},
        {"repeat": 2, "result": 790.5, "loadgen_validity": "INVALID"},
        {"repeat": 3, "result": 826.1, "loadgen_validity": "VALID"},
    ],
    "n": 3,
    "mean": 809.53,
    "relative_std": 0.022,
    "ci95_low": 765.0,
    "ci95_high": 854.1,
}


def test_plots_are_real_images(tmp_path):
    record = {"test_seconds": 15.1}
    accuracy = {
        "metrics": {"rouge1": 73.0},
        "reference_metrics": {"rouge1": 72.8, "rouge2": 52.4},
        "verdict": {
            "kind": "measured",
            "passed": False,
            "checks": [
                {"metric": "rouge1", "minimum": 72.1, "passed": True, "value": 73.0},
                {"metric": "rouge2", "minimum": 51.9, "passed": False, "value": 50.2},
            ],
        },
    }
    layers = {
        "layerwise_error": {
            "metric": "rel",
            "layers": {f"model.layers.{i}.mlp.up_proj": 0.01 * (i + 1) for i in range(50)},
        }
    }
    logits = {
        "logit_error": {
            "rel_mean": 0.04,
            "rel_max": 0.24,
            "cosine": 0.9986,
            "top1_agreement": 0.90,
            "kl_ref_q_mean": 0.065,
        }
    }
    written = [
        plots.plot_throughput(detail(), record, tmp_path / "throughput.png", "sys / bench / Server"),
        plots.plot_latency(detail(), tmp_path / "latency.png", "sys / bench / Server"),
        plots.plot_token_latency(detail(), tmp_path / "token.png", "sys / bench / Server", {"ttft": 2000, "tpot": 200}),
        plots.plot_accuracy(accuracy, tmp_path / "accuracy.png", "accuracy"),
        plots.plot_quantization(layers, tmp_path / "layers.png", "per layer"),
        plots.plot_quantization(logits, tmp_path / "logits.png", "logits"),
        plots.plot_spread(SPREAD, tmp_path / "spread.png", "sys / bench / Offline: run-to-run spread"),
    ]
    for path in written:
        assert_real_plot(path.read_bytes(), path.name)
    # With the harness's timeline: a third panel, the rates over the run.
    timeline = {"interval_s": 0.5, "samples": [[0.5 * i, 20 * i, 500 * i + (i % 3) * 40] for i in range(40)]}
    with_timeline = plots.plot_throughput(detail(), record, tmp_path / "timeline.png", "sys / bench / Server", timeline)
    assert_real_plot(with_timeline.read_bytes(), "timeline.png")
    wide, _ = Image.open(with_timeline).size
    assert wide > Image.open(written[0]).size[0]
    times, queries, tokens = plots.timeline_rates(timeline)
    assert times[0] == 0.25 and queries == [40.0] * 39 and tokens[:3] == [1080.0, 1080.0, 840.0]
    # What a log does not hold is said in the image (text on a white canvas), not left out.
    for path in (
        plots.plot_token_latency({}, tmp_path / "none.png", "Offline", None),
        plots.plot_accuracy(
            {"verdict": {"checks": [], "reason": "vbench_score not computed"}}, tmp_path / "na.png", "x"
        ),
    ):
        facts = image_facts(path.read_bytes())
        assert facts["stddev"] > 3 and facts["dominant"] < 0.999, (path.name, facts)
    # Same data, same bytes (no version or date stamped into the PNG).
    again = plots.plot_latency(detail(), tmp_path / "latency2.png", "sys / bench / Server")
    assert again.read_bytes() == (tmp_path / "latency.png").read_bytes()


def test_blank_canvas_is_caught(tmp_path):
    buffer = io.BytesIO()
    Image.new("RGB", (800, 500), "white").save(buffer, format="PNG")
    with pytest.raises(AssertionError, match="blank"):
        assert_real_plot(buffer.getvalue(), "white.png")


def test_layer_errors_of_each_manifest_kind():
    errors, _ = plots.layer_errors({"layerwise_error": {"layers": {"a": 0.1}}})
    assert errors == {"a": 0.1}
    errors, _ = plots.layer_errors({"weight_error": {"transformer": {"layers": {"blocks.0.ffn": {"rel_error": 0.02}}}}})
    assert errors == {"transformer/blocks.0.ffn": 0.02}
    assert plots.layer_errors({"logit_error": {"rel_mean": 0.1}})[0] == {}


def test_pages_hold_their_tables():
    summary = pages.summary_page(
        "system,scenario,loadgen_validity\ncpu,Offline,VALID\ncpu,Server,INVALID\n",
        "# title\n\n**NOT SUBMITTABLE: test-scale run.**\n",
        {
            "status": "FAIL",
            "findings": [{"rule": "loadgen-valid", "path": "x", "message": "INVALID", "severity": "error"}],
        },
    )
    assert "NOT SUBMITTABLE" in summary and "Submission check: FAIL" in summary
    assert '<td class="pass">VALID</td>' in summary and '<td class="fail">INVALID</td>' in summary
    compliance = pages.compliance_page(
        [
            {
                "system": "s",
                "benchmark": "b",
                "scenario": "Offline",
                "test": "TEST06",
                "verdict": {"passed": True},
                "verify_text": "ok <1>",
            }
        ]
    )
    assert "TEST06" in compliance and "PASS" in compliance and "ok &lt;1&gt;" in compliance
    provenance = pages.provenance_page(
        [
            {
                "system": "s",
                "benchmark": "b",
                "scenario": "Offline",
                "provenance": {"git_commit": "abc", "host": {"cpu_model": "EPYC"}},
            }
        ]
    )
    assert "git_commit" in provenance and "host.cpu_model" in provenance and "EPYC" in provenance


def test_a_repeated_scenario_gets_its_spread_plot(default_config):
    config = copy.deepcopy(default_config)
    system = next(iter(config["systems"].values()))
    benchmark = next(iter(system["benchmarks"].values()))
    benchmark["Offline"]["repeats"] = 3
    items = [i for i in report_items(Plan(config)) if i.kind == "spread"]
    assert [(i.where["scenario"], i.labels["figure"]) for i in items] == [("Offline", "run-to-run spread")]


def test_report_items_of_the_default_config(default_config):
    items = report_items(Plan(default_config))
    kinds = {(i.kind, i.where.get("scenario")) for i in items}
    assert ("token_latency", "Server") in kinds and ("token_latency", "Interactive") in kinds
    assert ("token_latency", "Offline") not in kinds  # LoadGen logs no token percentiles offline
    assert {"summary", "compliance", "provenance", "quantization", "accuracy", "throughput", "latency"} <= {
        i.kind for i in items
    }
    assert len({i.path for i in items}) == len(items)
    assert {i.category for i in items} <= set(CATEGORIES)


def browser() -> str | None:
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.mark.slow
def test_report_in_a_browser(e2e_workdir, tmp_path):
    """`snakemake --report` on the finished end-to-end run, rendered by headless chromium:
    a screenshot that is not blank, every section in the page, every plot a real image."""
    chromium = browser()
    if chromium is None:
        pytest.skip("no chromium: ./install.sh --test installs Debian's chromium with apt (root, apt reachable)")
    # A copy of the finished run, so the report's files land outside it; mtimes kept, so only
    # the report's own rule can run (it already has where the fixture ran this workflow).
    work = make_workdir(tmp_path)
    for name in ("results", "resources", ".snakemake"):
        shutil.copytree(e2e_workdir / name, work / name, symlinks=True)
    shutil.copyfile(E2E_CONFIG, work / "e2e.yaml")
    base = ("--cores", "1", "--configfile", "e2e.yaml", "--rerun-triggers", "mtime")
    result = run_snakemake(work, "report_plots", *base, timeout=600)
    assert result.returncode == 0, result.stderr[-5000:]
    result = run_snakemake(work, *base, "--report", "report.html", timeout=600)
    assert result.returncode == 0, result.stderr[-5000:]
    report = work / "report.html"
    text = report.read_text()
    items = report_items(Plan(load_yaml(work / "e2e.yaml")))

    # Every plot, read back from the files and from the report's embedded copies.
    pngs = [i for i in items if i.path.endswith(".png")]
    for item in pngs:
        assert_real_plot((work / item.path).read_bytes(), item.path)
    embedded = re.findall(r"data:image/png;charset=utf8;filename=[^;]+;base64,([A-Za-z0-9+/=]+)", text)
    assert len(embedded) == len(pngs)
    for data in embedded:
        assert_real_plot(base64.b64decode(data), "embedded plot")

    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=15000"]
    shot = tmp_path / "report.png"
    run = subprocess.run(
        [chromium, *flags, "--window-size=1400,1000", f"--screenshot={shot}", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert shot.is_file(), run.stderr[-3000:]
    facts = image_facts(shot.read_bytes())
    assert facts["size"] == (1400, 1000)
    assert facts["stddev"] > 20 and facts["dominant"] < 0.9, f"blank screenshot: {facts}"

    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=180
    ).stdout
    # The menu the report's scripts render (not only the embedded data): every section there.
    menu = dom.split('id="results"')[0]
    for category in {i.category for i in items}:
        assert category in menu, f"section {category!r} missing from the rendered page"
    for title in ("Workflow", "Statistics", "mlperf-repro"):
        assert title in menu
    for item in items:
        assert item.path in dom, f"{item.path} missing from the report"
