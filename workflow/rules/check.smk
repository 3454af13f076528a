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
