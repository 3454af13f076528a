"""Command line: ``python -m mlperf_repro <command>`` (also installed as ``mlperf-repro``).

Commands: ``check`` (any submission tree or tarball against a round's rules), ``compare``
(partners' submissions against a reference), ``plan`` (jobs, wall time, GPU-hours and disk
per stage, estimated from a config before anything runs), ``k8s-render``, ``quant-check``
(any quantized checkpoint folder against its config, decoded with the project's codecs),
``harmony-vocab`` (gpt-oss's o200k vocabulary from the npm tiktoken package), ``import`` (a
config that reproduces one system of a published submission), ``lock`` (the environment a
config resolves to, written beside it; the workflow checks it before any run),
``demo-checkpoints`` (rebuild or check the shipped demo models), ``config-reference``
(config/README.md from the config schema's descriptions). The workflow
itself runs with ``snakemake``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .errors import UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mlperf-repro", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    from .check import cli as check_cli
    from .compare import cli as compare_cli

    check_parser = commands.add_parser(
        "check",
        help="check a submission tree or tarball against a round's rules",
        description=check_cli.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check_cli.add_arguments(check_parser)

    compare_parser = commands.add_parser(
        "compare",
        help="compare partners' submissions with a reference",
        description=compare_cli.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare_cli.add_arguments(compare_parser)
    plan_parser = commands.add_parser(
        "plan",
        help="estimate jobs, wall time, GPU-hours and disk per stage",
        description="Estimate, from the config alone, what the workflow will run: per "
        "stage the jobs, wall time, GPU-hours and disk, and the total, with "
        "every assumption named.",
    )
    plan_parser.add_argument(
        "--configfile", default="config/config.yaml", help="the workflow config (default: %(default)s)"
    )
    plan_parser.add_argument(
        "--schema", default=str(DEFAULT_SCHEMA), help="the config schema (default: the workflow's)"
    )
    plan_parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    plan_parser.add_argument(
        "--bundle",
        action="store_true",
        help="also say how large the config's offline bundle will be (mlperf-repro bundle; asks the package "
        "index for the sizes of wheels not on local disk, once: they are cached)",
    )
    render_parser = commands.add_parser(
        "k8s-render",
        help="write and validate the Kubernetes Job of every job (no cluster needed)",
        description="Plan the workflow with a Kubernetes profile and write the batch/v1 Job the executor plugin "
        "would submit for each job, one YAML file per job plus index.json, and the server StatefulSet and "
        "Service of every launch: kubernetes system; every manifest is checked against the Kubernetes "
        "schema and the API server's rules. Exit 1 if one is invalid.",
    )
    render_parser.add_argument(
        "--configfile", default="config/config.yaml", help="the workflow config (default: %(default)s)"
    )
    render_parser.add_argument(
        "--profile", default="profiles/kubernetes", help="the Kubernetes profile (default: %(default)s)"
    )
    render_parser.add_argument("--out", required=True, help="folder for the manifests")
    render_parser.add_argument("--workdir", default=".", help="the workflow's root, where a run starts (default: .)")
    quant_parser = commands.add_parser(
        "quant-check",
        help="validate a quantized checkpoint folder (layout, scales, error vs the unquantized model)",
        description="Read the folder's quantization_config (quark, compressed-tensors, modelopt) and its "
        "safetensors headers, check that every quantized layer has its scales in the format's shapes and "
        "dtypes and that excluded layers are not quantized, decode the weights with the project's codecs "
        "and, with --reference, measure each layer's relative weight error. A Diffusers pipeline folder "
        "(model_index.json) is checked component by component against the reference pipeline. Exit 0: no "
        "finding; 1: findings (the worst layers named); 2: not a quantized checkpoint.",
    )
    quant_parser.add_argument("directory", help="the quantized checkpoint folder")
    quant_parser.add_argument("--reference", help="the unquantized checkpoint folder to measure the error against")
    quant_parser.add_argument(
        "--max-error", type=float, help="bound on each layer's relative weight error (default: the format's)"
    )
    quant_parser.add_argument("--json", action="store_true", help="print the report as JSON")
    vocab_parser = commands.add_parser(
        "harmony-vocab",
        help="write o200k_base.tiktoken (gpt-oss's vocabulary) from the npm tiktoken package, checksum-verified",
        description="openai-harmony reads gpt-oss's vocabulary from o200k_base.tiktoken and downloads it when "
        "absent. On a machine that reaches only a package mirror, `npm pack tiktoken@1.0.22` fetches the npm "
        "tiktoken package, which carries the same ranks; this rebuilds the file from it into OUT and checks it "
        "against the sha256 openai-harmony pins. Point datasets.<name>.harmony_vocab or "
        "MLPERF_REPRO_HARMONY_VOCAB at OUT.",
    )
    vocab_parser.add_argument(
        "--from", dest="source", required=True, help="the npm package tarball, or its encoders/o200k_base.json"
    )
    vocab_parser.add_argument("-o", "--out", required=True, help="folder to write o200k_base.tiktoken into")
    import_parser = commands.add_parser(
        "import",
        help="write a config that reproduces one system of a published submission",
        description="Read a published results repository folder, a submission tree or a tarball and write one config "
        "of this workflow that reproduces the named system's submission: its description verbatim, each scenario's "
        "LoadGen settings (user.conf, checked against LoadGen's log), the serving setup the submitter's code states "
        "(engine arguments, environment, parallel layout), the quantization and checkpoints its setup scripts and "
        "documentation name, and its image. Each value's comment names the file it came from; facts the source lacks "
        "are TODO: values that preflight refuses by name. Nothing is written unless the whole import succeeds.",
    )
    import_parser.add_argument("source", help="results repository folder, submission tree or tarball")
    import_parser.add_argument("--submitter", required=True, help="the submitter folder to read, e.g. AMD")
    import_parser.add_argument(
        "--system",
        required=True,
        nargs="+",
        help="the system's id (its systems/<id>.json name); several make one config (say single- and multi-node)",
    )
    import_parser.add_argument("--benchmarks", nargs="+", help="only these benchmarks (results folder names)")
    import_parser.add_argument("-o", "--out", required=True, help="the config file to write")
    import_parser.add_argument(
        "--source-name", help="how the config names the source (default: SOURCE as given), e.g. a repository's name"
    )
    import_parser.add_argument(
        "--launch",
        choices=("slurm-shared", "kubernetes"),
        default="slurm-shared",
        help="how a multi-node system's servers start: one SLURM server job (slurm-shared, the default) or "
        "server pods on Kubernetes (kubernetes)",
    )
    import_parser.add_argument(
        "--auto-qps",
        action="store_true",
        help="write target_qps: auto with the submitter's rate as start_qps: each scenario's target is measured on "
        "this machine first (find_performance)",
    )
    import_parser.add_argument(
        "--stand-in",
        nargs="?",
        const=str(DEFAULT_CONFIG),
        metavar="CONFIG",
        help="for a machine without the submitter's hardware: take models, datasets, quantization, the system's "
        "description, engine and LoadGen settings from CONFIG's stand-ins (default: the embedded demo config); "
        "imported.stand_in lists every substitution",
    )
    import_parser.add_argument(
        "--schema", default=str(DEFAULT_SCHEMA), help="the config schema (default: the workflow's)"
    )
    demo_parser = commands.add_parser(
        "demo-checkpoints",
        help="rebuild the shipped demo checkpoints (artifacts/models) from their recorded spec, or --check them",
        description="The default config acquires its stand-in model from artifacts/models/<name>/ (file:// source, "
        "checked against <name>.sha256) instead of training it on every fresh run. This command trains each "
        "shipped checkpoint again from the source and spec in its build_report.json and writes <name>/ and "
        "<name>.sha256 under --out; --check rebuilds into a scratch folder and lists every file that differs "
        "from the committed manifest (exit 1 when any does).",
    )
    demo_parser.add_argument("names", nargs="*", help="checkpoints to rebuild (default: every shipped one)")
    demo_parser.add_argument("-o", "--out", help="folder to write into (default: artifacts/models, in place)")
    demo_parser.add_argument("--check", action="store_true", help="rebuild in a scratch folder and compare")
    lock_parser = commands.add_parser(
        "lock",
        help="write <config>.lock.json: artifacts, containers, quantization, LoadGen and packages of this environment",
        description="Resolve the config in this environment and write its lock beside it (my.yaml -> "
        "my.lock.json): every model's and dataset's checksum manifest hash (builtin sources: kind and "
        "parameters), every system's container reference and digest (asked of the registry with skopeo when "
        "it is on PATH), the quantization recipes and the versions of Quark, torch and transformers, the "
        "installed LoadGen and the round's seeds, and the packages of the workflow's, Quark's and VBench's "
        "environments. The workflow stops before any run where the environment differs from it, unless "
        'given --config lock_override="<reason>". Run it in the workflow\'s directory (relative '
        "sha256_manifest paths are read from there).",
    )
    lock_parser.add_argument(
        "--configfile", default="config/config.yaml", help="the workflow config (default: %(default)s)"
    )
    lock_parser.add_argument(
        "--schema", default=str(DEFAULT_SCHEMA), help="the config schema (default: the workflow's)"
    )
    lock_parser.add_argument(
        "--offline", action="store_true", help="ask no registry for the containers' digests (recorded as not resolved)"
    )
    bundle_parser = commands.add_parser(
        "bundle",
        help="write an offline bundle: the lock, wheels of every environment, this project, models, datasets, images",
        description="On a connected machine, write one folder that carries everything a run of the config needs "
        "to a site without a network: the config and its lock (the manifest), the wheels of every environment "
        "the config needs as the lock pins them, for --python/--platform (default: this machine's), this "
        "project as a wheel, every model and dataset the config fetches (verified against its checksums), and "
        "each system's image as an OCI archive where skopeo is installed (else its pull command). What cannot "
        "be fetched here is listed with the command that completes it. Running it again completes the bundle "
        "(finished parts are kept). --verify DIR re-hashes a bundle and says what a site needs besides it.",
    )
    bundle_parser.add_argument("--configfile", default="config/config.yaml", help="the config (default: %(default)s)")
    bundle_parser.add_argument(
        "--schema", default=str(DEFAULT_SCHEMA), help="the config schema (default: the workflow's)"
    )
    bundle_parser.add_argument("-o", "--out", help="the bundle folder to write or complete")
    bundle_parser.add_argument("--verify", metavar="DIR", help="check a bundle against its manifest instead")
    bundle_parser.add_argument("--python", help="the target's Python version, e.g. 3.11 (default: this machine's)")
    bundle_parser.add_argument(
        "--platform", action="append", help="a target platform tag, e.g. manylinux_2_28_x86_64 (repeatable)"
    )
    bundle_parser.add_argument("--tar", action="store_true", help="also write DIR.tar beside the folder")
    reference_parser = commands.add_parser(
        "config-reference",
        help="write the config reference (config/README.md) from the config schema's descriptions",
        description="Render the config schema (workflow/schemas/config.schema.yaml) as Markdown: one section "
        "per object, each a table of key, type, default and meaning. The schema's descriptions are the one "
        "place a key is documented; config/README.md is this command's output. Without -o the reference is "
        "printed (its links as config/README.md needs them).",
    )
    reference_parser.add_argument("-o", "--out", help="the file to write (default: print it)")
    reference_parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the file (-o, default config/README.md) differs from the rendering",
    )
    reference_parser.add_argument(
        "--schema", default=str(DEFAULT_SCHEMA), help="the config schema (default: the workflow's)"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "k8s-render":
            return run_k8s_render(args)
        if args.command == "check":
            return check_cli.run(args)
        if args.command == "compare":
            return compare_cli.run(args)
        if args.command == "plan":
            return run_plan(args)
        if args.command == "quant-check":
            return run_quant_check(args)
        if args.command == "import":
            return run_import(args)
        if args.command == "lock":
            return run_lock(args)
        if args.command == "bundle":
            return run_bundle(args)
        if args.command == "demo-checkpoints":
            return run_demo_checkpoints(args)
        if args.command == "config-reference":
            return run_config_reference(args)
        if args.command == "harmony-vocab":
            from .harmony import vocab_from_npm_tiktoken

            print(vocab_from_npm_tiktoken(args.source, args.out))
            return 0
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 2


# The workflow's schema next to the package in this checkout (src/ layout).
DEFAULT_SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
# The embedded default config (the demo's stand-in models and CPU systems).
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"


def run_demo_checkpoints(args: argparse.Namespace) -> int:
    from .demo import checkpoints

    names = args.names or checkpoints.shipped_names()
    if args.check:
        failed = 0
        for name in names:
            differing = checkpoints.check(name)
            verdict = "differs: " + ", ".join(differing) if differing else "reproduced: every file equals the manifest"
            print(f"{name}: {verdict}")
            failed += bool(differing)
        return 1 if failed else 0
    for name in names:
        print(checkpoints.rebuild(name, args.out or checkpoints.SHIPPED_DIR))
    return 0


def run_config_reference(args: argparse.Namespace) -> int:
    from . import config_reference

    root = DEFAULT_SCHEMA.parents[2]
    out = Path(args.out) if args.out else root / config_reference.REFERENCE
    # The descriptions' links are written from the repository root; the file's folder decides them.
    base = os.path.relpath(out.resolve().parent, root) if (args.out or args.check) else "config"
    if args.check:
        problem = config_reference.check(out, args.schema, base=base)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 1
        print(f"{out}: up to date with {args.schema}")
        return 0
    text = config_reference.render_file(args.schema, base=base)
    if args.out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")
    else:
        sys.stdout.write(text)
    return 0


def run_plan(args: argparse.Namespace) -> int:
    from .estimate import bundle_note, estimate_file

    if not Path(args.schema).is_file():
        raise UserError(
            f"schema {args.schema} not found; pass --schema workflow/schemas/config.schema.yaml "
            f"from the workflow checkout"
        )
    estimate = estimate_file(args.configfile, args.schema)
    if getattr(args, "bundle", False):
        from .bundle.size import estimate_bundle
        from .config import load_yaml

        size = estimate_bundle(load_yaml(args.configfile))
        estimate.notes.append(bundle_note(size))
    sys.stdout.write(estimate.to_json() if args.json else estimate.render())
    return 0


def _stand_in(path: str | None) -> tuple[str, dict] | None:
    from .config import load_yaml

    if path is None:
        return None
    if not Path(path).is_file():
        raise UserError(f"--stand-in {path}: no such config file")
    config = load_yaml(path)
    if not isinstance(config, dict) or not isinstance(config.get("benchmarks"), dict):
        raise UserError(f"--stand-in {path}: not a config of this workflow (no benchmarks)")
    return path, config


def run_import(args: argparse.Namespace) -> int:
    from .importer import build_import, write_import

    command = ["mlperf-repro import", args.source_name or args.source, "--submitter", args.submitter, "--system"]
    command += args.system + (["--benchmarks", *args.benchmarks] if args.benchmarks else []) + ["-o", args.out]
    imported = build_import(
        args.source,
        args.submitter,
        args.system,
        args.benchmarks,
        source_name=args.source_name,
        command=" ".join(
            command
            + (["--launch", args.launch] if args.launch != "slurm-shared" else [])
            + (["--auto-qps"] if args.auto_qps else [])
            + (["--stand-in", args.stand_in] if args.stand_in else [])
        ),
        stand_in=_stand_in(args.stand_in),
        auto_qps=args.auto_qps,
        launch=args.launch,
    )
    path = write_import(imported, args.out, args.schema)
    print(f"wrote {path}")
    for note in imported.report.notes:
        print(f"  note: {note}")
    from .check.preflight import placeholders
    from .importer.yaml_text import plain

    todos = len(placeholders({k: v for k, v in plain(imported.config).items() if k != "imported"}))
    # The preflight is an onstart handler, which a dry run (-n) skips: the run itself names them.
    print(
        f"  {todos} TODO: value(s) to fill in before a run "
        f"(`snakemake --cores all --configfile {path}` names each and stops before any job)"
    )
    return 0


def run_lock(args: argparse.Namespace) -> int:
    from .config import load_yaml, validate_config
    from .lock import resolve_with_skopeo, write_lock

    if not Path(args.schema).is_file():
        raise UserError(f"schema {args.schema} not found; pass --schema workflow/schemas/config.schema.yaml")
    config = validate_config(load_yaml(args.configfile), args.schema)
    path, lock = write_lock(args.configfile, config, resolve_image=None if args.offline else resolve_with_skopeo)
    packages = lock["packages"]
    envs = ", ".join(
        f"{name} {len(found)} packages" if isinstance(found, dict) else f"{name} {found}"
        for name, found in packages.items()
    )
    artifacts = sum(len(entries) for entries in lock["artifacts"].values())
    print(f"wrote {path}: {artifacts} artifacts, {len(lock['containers'])} systems, {envs}")
    for system, container in lock["containers"].items():
        if container and str(container["resolved"]).startswith("not resolved"):
            print(f"  container of {system}: {container['resolved']}")
        elif container and container["resolved"] != container["digest"]:
            registry, pinned = container["resolved"], container["digest"]
            print(f"  warning: the registry serves {registry} for {system}, the config pins {pinned}")
    return 0


def run_bundle(args: argparse.Namespace) -> int:
    from .bundle.build import build_bundle, verify_bundle
    from .bundle.wheels import Target, local_target
    from .config import load_yaml, validate_config

    if args.verify:
        manifest, problems = verify_bundle(args.verify)
        print(
            f"{args.verify}: {len(manifest['files'])} files, {manifest.get('bytes', 0) / 1e9:.2f} GB, target "
            f"Python {manifest['target']['python']}"
        )
        for line in problems:
            print(f"  problem: {line}")
        print("a site needs besides the bundle:")
        for need in manifest.get("site_needs") or []:
            print(f"  - {need}")
        print("bundle: OK" if not problems else f"bundle: {len(problems)} problem(s)")
        return 0 if not problems else 1
    if not args.out:
        raise UserError("bundle: give -o DIR (the folder to write) or --verify DIR")
    if not Path(args.schema).is_file():
        raise UserError(f"schema {args.schema} not found; pass --schema workflow/schemas/config.schema.yaml")
    config = validate_config(load_yaml(args.configfile), args.schema)
    local = local_target()
    target = Target(args.python or local.python, tuple(args.platform) if args.platform else local.platforms)
    manifest = build_bundle(config, args.configfile, args.out, target=target)
    missing = {part: state for part, state in manifest["parts"].items() if state.get("status") == "missing"}
    print(f"wrote {args.out}: {len(manifest['files'])} files, {manifest['bytes'] / 1e9:.2f} GB")
    for part, state in sorted(missing.items()):
        print(
            f"  not in the bundle: {part}: {state.get('what')}"
            + (f"\n    complete with: {state['command']}" if state.get("command") else "")
        )
    if args.tar:
        import tarfile

        with tarfile.open(f"{args.out.rstrip('/')}.tar", "w") as tar:
            tar.add(args.out, arcname=Path(args.out).name)
        print(f"wrote {args.out.rstrip('/')}.tar")
    return 0


def run_quant_check(args: argparse.Namespace) -> int:
    import json

    from .quant.validate import validate_checkpoint

    if args.reference is not None and not Path(args.reference).is_dir():
        raise UserError(f"--reference {args.reference}: no such directory")
    report = validate_checkpoint(args.directory, args.reference, max_error=args.max_error)
    sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n" if args.json else report.render())
    return 0 if report.ok else 1


def run_k8s_render(args: argparse.Namespace) -> int:
    from .cluster.kubernetes import render, validate_manifest, write_manifests
    from .launch.kubernetes import render_servers, write_server_manifests

    jobs = render(args.configfile, args.profile, workdir=args.workdir)
    paths = write_manifests(jobs, args.out)
    invalid = 0
    for job, path in zip(jobs, paths):
        for problem in validate_manifest(job.manifest):
            print(f"{path}: {problem}", file=sys.stderr)
            invalid += 1
    # launch: kubernetes systems: the server objects their run jobs create.
    server_sets = render_servers(args.configfile, args.profile, workdir=args.workdir)
    server_paths = iter(write_server_manifests(server_sets, args.out))
    for problem in dict.fromkeys(p for entry in server_sets for p in entry.problems):
        print(f"{args.configfile}: {problem}", file=sys.stderr)
        invalid += 1
    for entry in server_sets:
        for manifest in entry.manifests:
            path = next(server_paths)
            for problem in validate_manifest(manifest):
                print(f"{path}: {problem}", file=sys.stderr)
                invalid += 1
    gpu_jobs = sum(1 for job in jobs if any(v not in ("0", 0) for v in job.gpu_limits().values()))
    servers = (
        f" and {sum(len(e.manifests) for e in server_sets)} server manifests ({len(server_sets)} server set(s))"
        if server_sets
        else ""
    )
    print(
        f"{len(paths)} Job manifests ({gpu_jobs} with GPUs){servers} in {args.out}; "
        + (f"{invalid} problem(s)" if invalid else "all valid")
    )
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
