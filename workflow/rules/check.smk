# Stage 6: our own checker on the packaged tree (stricter than MLCommons').


rule check_submission:
    input:
        package=PATHS["package"],
    output:
        txt=PATHS["check_txt"],
        json=PATHS["check_json"],
    log:
        "logs/check/check.log",
    localrule: True
    conda:
        WORKFLOW_ENV
    params:
        round=config["round"],
    script:
        f"{SCRIPTS}/check.py"


onstart:
    # Seconds of checks before hours of runs: the config against the round's rules, the
    # installed LoadGen's seeds, the disk; writes results/check/preflight.txt and stops the
    # workflow before any job starts if something is wrong. A handler, not a rule: a rule
    # that every run depends on hides config edits from Snakemake's rerun triggers.
    preflight_or_stop(config, PATHS["preflight"])
    record_lock_check(LOCK_CHECK, PATHS["lock_check"])
