# Compare: a reference submission against partners' (config key `compare`), the same as
# `python -m mlperf_repro compare`. Reports: results/compare/<reference>_vs_<partner>.{md,csv,html}.


def compare_specs():
    """Each input as the CLI takes it: comma-separated paths of repeat runs."""
    spec = config.get("compare") or {}

    def join(entry):
        return ",".join(entry) if isinstance(entry, list) else entry

    return join(spec.get("reference", [])), [join(p) for p in spec.get("partners", [])]


def compare_outputs():
    if not config.get("compare"):
        return []
    reference, partners = compare_specs()
    return [f"results/compare/{stem}.{ext}" for stem in compare_stems(reference, partners) for ext in ("md", "csv", "html")]


def compare_inputs():
    """Archives and this workflow's own outputs are inputs (built first, reruns when they
    change); external folders are read as they are."""
    reference, partners = compare_specs()
    inputs = []
    for path in (p for spec in [reference, *partners] for p in spec.split(",") if p):
        if path.startswith("results/package"):
            inputs.append("results/package")
        elif not Path(path).is_dir():
            inputs.append(path)
    return inputs


rule compare:
    input:
        compare_inputs(),
    output:
        compare_outputs(),
    params:
        reference=lambda wc: compare_specs()[0],
        partners=lambda wc: compare_specs()[1],
        settings=lambda wc: config.get("compare", {}),
    log:
        "logs/compare/compare.log",
    localrule: True
    script:
        f"{SCRIPTS}/compare.py"
