# Stage 7: the summary table (CSV + Markdown), printed when the workflow finishes, and the
# plots and pages of the HTML report (`snakemake --report report.html`).


report: "../report/workflow.rst"


rule summary:
    input:
        accuracy=PLAN.accuracy_outputs(),
        runs=PLAN.run_outputs(),
        # repeats: N - every repeat of a scenario's performance test (the spread).
        repeats=PLAN.repeat_outputs(),
        # Each measurement pair's attempts (the summary names the pairs measured again).
        pairs=PLAN.pair_outputs(),
        check=PATHS["check_json"],
        acquired=[PLAN.acquire_record_path("models", m) for m in PLAN.models],
        quantized=[PLAN.quantized_dir(m, r) for m, r in PLAN.quantized_models],
    output:
        csv=PATHS["summary_csv"],
        md=PATHS["summary_md"],
        json=PATHS["summary_json"],
    log:
        "logs/report/summary.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        config=PLAN.submission_config(),
    script:
        f"{SCRIPTS}/summary.py"


rule official_summary:
    # The submission checker's summary CSV and the final-report spreadsheet, from the tree.
    input:
        package=PATHS["package"],
    output:
        csv=PATHS["official_summary_csv"],
        xlsx=PATHS["final_report_xlsx"],
    log:
        "logs/report/official_summary.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        round=config["round"],
    script:
        f"{SCRIPTS}/official_summary.py"


rule report_plots:
    # Every plot and page of the HTML report, marked for `snakemake --report` (categories,
    # captions: workflow/report/*.rst; items: mlperf_repro.report.items).
    input:
        summary=PATHS["summary_csv"],
        check=PATHS["check_json"],
        accuracy=PLAN.accuracy_outputs(),
        runs=PLAN.run_outputs(),
        # repeats: N - the spread plot reads every repeat.
        repeats=PLAN.repeat_outputs(),
        compliance=PLAN.compliance_outputs(),
        quantized=[PLAN.quantized_dir(m, r) for m, r in PLAN.quantized_models],
    output:
        *[
            report(
                item.path,
                caption=f"../report/{item.caption}",
                category=item.category,
                subcategory=item.subcategory,
                labels=item.labels,
            )
            for item in report_items(PLAN)
        ],
    log:
        "logs/report/report_plots.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        config=PLAN.submission_config(),
    script:
        f"{SCRIPTS}/report_plots.py"
