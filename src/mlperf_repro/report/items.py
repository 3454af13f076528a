"""What the HTML report (``snakemake --report``) holds: one item per file rule ``report_plots``
writes, with its category, subcategory, labels and caption. Light (no matplotlib): the
workflow's main process reads it to declare the rule's outputs."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..plan import Plan

REPORT_DIR = "results/report/html"
# Category names as the report's menu shows them (numbered: Snakemake sorts them by name).
SUMMARY = "1. Summary"
PERFORMANCE = "2. Performance"
ACCURACY = "3. Accuracy"
QUANTIZATION = "4. Quantization"
SCALING = "5. Scaling study"
COMPLIANCE = "6. Compliance"
PROVENANCE = "7. Provenance"
CATEGORIES = (SUMMARY, PERFORMANCE, ACCURACY, QUANTIZATION, SCALING, COMPLIANCE, PROVENANCE)


@dataclass(frozen=True)
class Item:
    kind: str  # throughput, latency, token_latency, spread, accuracy, quantization, summary, compliance, provenance
    path: str
    category: str
    subcategory: str | None = None
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    where: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def caption(self) -> str:
        """The caption's file, relative to the workflow's ``report/`` folder."""
        return f"{self.kind}.rst"


def report_items(plan: Plan) -> list[Item]:
    items = [
        Item("summary", f"{REPORT_DIR}/summary.html", SUMMARY, labels={"page": "summary table and check"}),
        Item("compliance", f"{REPORT_DIR}/compliance.html", COMPLIANCE, labels={"page": "compliance verdicts"}),
        Item("provenance", f"{REPORT_DIR}/provenance.html", PROVENANCE, labels={"page": "provenance of each result"}),
    ]
    for job in plan.jobs:
        where = {"system": job.system, "benchmark": job.benchmark, "scenario": job.scenario}
        folder = f"{REPORT_DIR}/{job.system}/{job.benchmark}/{job.scenario}"
        sub = f"{job.benchmark} {job.scenario}"
        kinds = ["throughput", "latency"]
        facts = plan.facts(job.benchmark)
        if facts.is_llm and facts.latency_limits_ms(job.scenario):
            kinds.append("token_latency")
        if plan.repeats(job.system, job.benchmark, job.scenario) > 1:
            kinds.append("spread")
        figures = {
            "throughput": "throughput",
            "latency": "query latency",
            "token_latency": "TTFT and TPOT",
            "spread": "run-to-run spread",
        }
        for kind in kinds:
            labels = {"system": job.system, "figure": figures[kind]}
            items.append(Item(kind, f"{folder}/{kind}.png", PERFORMANCE, sub, labels, where))
        items.append(Item("accuracy", f"{folder}/accuracy.png", ACCURACY, sub, {"system": job.system}, where))
    for model, recipe in plan.quantized_models:
        where = {"model": model, "recipe": recipe}
        items.append(
            Item(
                "quantization",
                f"{REPORT_DIR}/quantization/{model}-{recipe}.png",
                QUANTIZATION,
                labels={"model": model, "recipe": recipe},
                where=where,
            )
        )
    return items
