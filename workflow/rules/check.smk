# Stage 6: our own checker on the packaged tree (stricter than MLCommons').


rule check_submission:
    input:
        package="results/package",
    output:
        txt="results/check/report.txt",
        json="results/check/report.json",
    params:
        round=config["round"],
    log:
        "logs/check/check.log",
    localrule: True
    script:
        f"{SCRIPTS}/check.py"


rule preflight:
    # Seconds of checks before hours of runs: the config against the round's rules, the
    # installed LoadGen's seeds, the disk. Consumers take it as ancient() so a rerun of
    # the preflight (any config edit) never reruns finished work by itself.
    output:
        "results/check/preflight.txt",
    params:
        config=config,
    log:
        "logs/check/preflight.log",
    localrule: True
    script:
        f"{SCRIPTS}/preflight.py"
