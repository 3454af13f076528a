"""``mlperf-repro check TREE|ARCHIVE [--round vX.Y] [--json]``: the submission check on
any tree, ours or a partner's or a published results repository, as a folder or a tarball
(extracted through the same safe extraction as ``compare``).

One line per finding, naming the rule and the file; exit 0 when there is no error, 1 when
there is one, 2 when the input is not a submission. Without ``--round`` the round is the
one whose LoadGen seeds the performance logs carry.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

from ..archive import ARCHIVE_SUFFIXES, Limits, extract
from ..benchmarks import Round, available_rounds, load_round
from ..errors import UserError
from ..loadgen_logs import read_detail
from .endpoints_logs import get_path, is_endpoints_folder, load_config
from .files import TreeFiles, UnreadableFile
from .findings import Finding
from .tree import NOT_SUBMITTABLE_MARK, check_tree

SEED_KEY = "effective_qsl_rng_seed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tree", help="a submission tree (the folder holding closed/, open/ or network/) or a tarball")
    parser.add_argument(
        "--round",
        choices=available_rounds(),
        help="the round's rules to apply (default: the round whose seeds the logs carry)",
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--max-bytes", type=int, default=Limits.max_bytes, help="archive expansion limit")
    parser.add_argument("--max-files", type=int, default=Limits.max_files, help="archive entry-count limit")


def tree_root(path: Path, divisions: list[str], label: Path | None = None) -> Path:
    """The folder holding the division folders: ``path`` itself or one or two levels down
    (a tarball often wraps the tree in a folder)."""
    files = TreeFiles(path)
    candidates = [path]
    for depth in range(3):
        if depth:
            candidates = [inner for folder in candidates for inner in files.folders(folder)]
        found = [c for c in candidates if any(files.is_dir(c / d) for d in divisions)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise UserError(
                f"{path} holds several submission trees ({', '.join(map(str, found))}); check one at a time"
            )
    raise UserError(
        f"{label or path} is not a submission: no {', '.join(d + '/' for d in divisions)} folder in it or one or two "
        "levels down (give the folder that holds closed/<submitter>/results/...)"
    )


def _scenario_folders(files: TreeFiles, root: Path):
    """<division>/<submitter>/results/<system>/<benchmark>/<scenario> folders, links not followed."""
    for division in files.folders(root):
        for submitter in files.folders(division):
            for system in files.folders(submitter / "results"):
                for benchmark in files.folders(system):
                    yield from files.folders(benchmark)


def round_of_tree(root: Path) -> Round:
    """The round whose seeds the tree's performance logs carry (the most common one)."""
    by_seed = {str(load_round(name).seeds["qsl_rng_seed"]): name for name in available_rounds()}
    votes: Counter[str] = Counter()
    files = TreeFiles(root)
    for folder in _scenario_folders(files, root):
        log = folder / "performance/run_1/mlperf_log_detail.txt"
        if not files.is_file(log):
            continue
        try:
            seed = read_detail(files.lines(log), {SEED_KEY}).get(SEED_KEY)
        except UnreadableFile:
            continue
        if str(seed) in by_seed:
            votes[by_seed[str(seed)]] += 1
        if sum(votes.values()) >= 20:
            break
    if not votes:
        votes = _endpoints_votes(root, files)
    if not votes:
        raise UserError(
            f"cannot tell the round of {root} from its logs (no performance log carries a known round's seeds); "
            f"pass --round ({', '.join(available_rounds())})"
        )
    return load_round(votes.most_common(1)[0][0])


def _endpoints_votes(root: Path, files: TreeFiles) -> Counter[str]:
    """Rounds by the seeds of endpoints-harness results (config.yaml, no LoadGen log): the
    harness's dataloader seed is the round's sample-index seed (rounds with an endpoints table)."""
    rounds = [load_round(name) for name in available_rounds()]
    rounds = [r for r in rounds if r.data.get("endpoints")]
    votes: Counter[str] = Counter()
    for folder in _scenario_folders(files, root):
        for rules in rounds:
            table = rules.data["endpoints"]
            where = ((table.get("fields") or {}).get("effective_sample_index_rng_seed") or {}).get("config")
            if where and is_endpoints_folder(folder, table, files):
                config = load_config(folder, table, files=files)
                if str(get_path(config, where)) == str(rules.seeds["sample_index_rng_seed"]):
                    votes[rules.name] += 1
        if sum(votes.values()) >= 20:
            break
    return votes


def check_path(
    path: str | Path, round_name: str | None = None, limits: Limits | None = None
) -> tuple[Round, list[Finding]]:
    path = given = Path(path)
    if not path.exists():
        raise UserError(f"{path} does not exist (give a submission tree or a tarball of one)")
    with tempfile.TemporaryDirectory(prefix="mlperf-repro-check-") as scratch:
        if path.is_file():
            if not path.name.endswith(ARCHIVE_SUFFIXES):
                raise UserError(f"{path} is not a folder or a tar archive ({', '.join(ARCHIVE_SUFFIXES)})")
            path = extract(path, Path(scratch) / "tree", limits or Limits())
        divisions = load_round(round_name or available_rounds()[-1])["divisions"]
        root = tree_root(path, divisions, given)
        rules = load_round(round_name) if round_name else round_of_tree(root)
        # Finding paths are relative to the tree, whatever folder or archive wrapped it.
        return rules, check_tree(root, rules)


def run(args: argparse.Namespace) -> int:
    rules, findings = check_path(args.tree, args.round, Limits(args.max_bytes, args.max_files))
    errors = sum(f.severity == "error" for f in findings)
    status = "PASS" if not errors else "FAIL"
    if args.json:
        print(
            json.dumps(
                {
                    "tree": str(args.tree),
                    "round": rules.name,
                    "status": status,
                    "errors": errors,
                    "warnings": len(findings) - errors,
                    "findings": [f.__dict__ for f in findings],
                },
                indent=2,
            )
        )
    else:
        for finding in findings:
            print(finding.line())
        print(
            f"{args.tree}: {status} against the {rules.name} rules "
            f"({errors} error(s), {len(findings) - errors} warning(s))"
            + (" [test scale: NOT SUBMITTABLE]" if any(f.path == NOT_SUBMITTABLE_MARK for f in findings) else "")
        )
    return 1 if errors else 0
