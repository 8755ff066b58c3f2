"""``tierlab rerun DIR``: run the output of ``tierlab run --out DIR`` again from its expanded
scenario and say whether the results are identical, and what of its provenance changed."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tierlab.cli.common import EXIT_OK, EXIT_SIMULATION, EXIT_USAGE, OUT_OPTIONAL

#: The files of a run's output compared byte for byte (every other file holds wall times or
#: renders of these: summary.csv and run.json have the wall time, the plots are drawn from
#: heatmap.parquet).
COMPARED = (
    "scenario.toml",
    "stats.json",
    "timeseries.csv",
    "timeseries.parquet",
    "heatmap.parquet",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rerun",
        help="run a run's output directory again and compare the results",
        description="Run DIR (the output of `tierlab run SCENARIO --out DIR`) again from its "
        "expanded scenario (DIR/scenario.toml) and report whether every result file is "
        "byte-identical, and which of its recorded provenance (tierlab version and commit, "
        "input files, host, libraries) differs now. Exit status 0: identical; 1: a result "
        "differs.",
    )
    p.add_argument("dir", type=Path, help="a `tierlab run --out` directory")
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="NEW",
        help="keep the new run's output in NEW; " + OUT_OPTIONAL + " (the comparison runs in a "
        "temporary directory, removed)",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=main, parser=p)


def _load_run(d: Path) -> dict[str, Any]:
    run = d / "run.json"
    if not (d / "scenario.toml").is_file() or not run.is_file():
        raise OSError(f"{d}: not the output of `tierlab run --out` (no scenario.toml and run.json)")
    try:
        doc = json.loads(run.read_text())
    except ValueError as e:
        raise OSError(f"{run}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or "tierlab_version" not in doc:
        raise OSError(f"{run}: not a tierlab run.json (no tierlab_version)")
    return doc


def provenance_changes(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """What differs between two provenance records, one line each (inputs by content)."""
    if not old:
        return ["the first run recorded no provenance (an older tierlab)"]
    out: list[str] = []
    o_sw, n_sw = old.get("software", {}), new.get("software", {})
    if o_sw.get("tierlab_version") != n_sw.get("tierlab_version"):
        out.append(f"tierlab {o_sw.get('tierlab_version')} -> {n_sw.get('tierlab_version')}")
    og, ng = o_sw.get("git") or {}, n_sw.get("git") or {}
    if og.get("commit") != ng.get("commit") or og.get("dirty") != ng.get("dirty"):

        def show(g: dict[str, Any]) -> str:
            if not g:
                return "none"
            return f"{str(g.get('commit'))[:12]}{' (modified)' if g.get('dirty') else ''}"

        out.append(f"git commit {show(og)} -> {show(ng)}")
    if old.get("scenario_sha256") != new.get("scenario_sha256"):
        out.append("the expanded scenario")
    for kind, a, b in (
        ("python", o_sw.get("python"), n_sw.get("python")),
        *(
            (name, (o_sw.get("libraries") or {}).get(name), v)
            for name, v in (n_sw.get("libraries") or {}).items()
        ),
    ):
        if a != b:
            out.append(f"{kind} {a} -> {b}")
    new_inputs = {i["path"]: i for i in new.get("inputs", [])}
    for i in old.get("inputs", []):
        if i.get("builtin"):
            continue
        now = new_inputs.get(i["path"])
        if now is None:
            out.append(f"input {i['key']} ({i['path']}): no longer named by the scenario")
        elif now.get("sha256") is None:
            out.append(f"input {i['key']} ({i['path']}): {now.get('error', 'unreadable')}")
        elif now.get("sha256") != i.get("sha256"):
            out.append(f"input {i['key']} ({i['path']}): its content changed")
    oh, nh = old.get("host", {}), new.get("host", {})
    for k in ("hostname", "cpu_model", "cpus", "memory_bytes", "kernel"):
        if oh.get(k) != nh.get(k):
            out.append(f"host {k}: {oh.get(k)} -> {nh.get(k)}")
    return out


def compare(a: Path, b: Path) -> dict[str, str]:
    """For each compared file: ``identical``, ``differs``, ``missing in the first`` / ``the
    rerun``."""
    out: dict[str, str] = {}
    for name in COMPARED:
        fa, fb = a / name, b / name
        if not fa.exists() and not fb.exists():
            continue
        if not fa.exists():
            out[name] = "missing in the first run"
        elif not fb.exists():
            out[name] = "missing in the rerun"
        else:
            out[name] = "identical" if fa.read_bytes() == fb.read_bytes() else "differs"
    return out


def main(args: argparse.Namespace) -> int:
    from tierlab import provenance
    from tierlab.api import run_native
    from tierlab.reporters import write_all

    old = _load_run(args.dir)
    if old.get("interrupted") or old.get("error"):
        print(
            f"tierlab: {args.dir}: that run was cut short "
            f"({'interrupted' if old.get('interrupted') else old.get('error')}); rerunning it "
            "runs the whole scenario",
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory(prefix="tierlab-rerun-") as tmp:
        new_dir = args.out if args.out is not None else Path(tmp) / "rerun"
        spec = str(_staged_scenario(args.dir, old.get("provenance"), Path(tmp) / "scenario"))
        result = run_native(spec, [], None, None)
        if result.interrupted:
            print("tierlab: interrupted", file=sys.stderr)
            return 130
        old_prov = old.get("provenance")
        result.provenance = provenance.collect(spec, result.scenario, "local")
        if old_prov:
            # The inputs are the first run's, hashed again where it read them.
            result.provenance["inputs"] = [
                i if i.get("builtin") else {**i, **_rehash(Path(i["path"]))}
                for i in old_prov.get("inputs", [])
            ]
        write_all(result, new_dir)
        files = compare(args.dir, new_dir)
        changes = provenance_changes(old_prov, result.provenance)
        identical = bool(files) and all(v == "identical" for v in files.values())
        if args.json:
            doc = {
                "identical": identical,
                "files": files,
                "provenance_changes": changes,
            }
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            verdict = "identical results" if identical else "DIFFERENT results"
            print(f"{args.dir}: {verdict}")
            for name, v in files.items():
                print(f"  {name}: {v}")
            if changes:
                print("what differs from the first run's provenance:")
                for c in changes:
                    print(f"  {c}")
            else:
                print("provenance: same tierlab, inputs, host and libraries")
            if args.out is not None:
                print(f"the rerun's output is in {args.out}")
    if result.error is not None:
        print(f"tierlab: simulation error: {result.error}", file=sys.stderr)
    return EXIT_OK if identical else (EXIT_SIMULATION if files else EXIT_USAGE)


def _rehash(path: Path) -> dict[str, Any]:
    from tierlab import provenance

    try:
        return {"sha256": provenance.digest(path)}
    except OSError as e:
        return {"sha256": None, "error": e.strerror or str(e)}


def _staged_scenario(run_dir: Path, prov: dict[str, Any] | None, stage: Path) -> Path:
    """``run_dir/scenario.toml`` where its relative input paths lead to the inputs the first
    run read: a copy of it in a directory of ``stage`` in which each relative path is a
    symbolic link to the input's absolute path (recorded in the provenance). Without
    recorded inputs, the scenario file itself."""
    import os
    import tomllib

    from tierlab.provenance import referenced_paths

    scenario = run_dir / "scenario.toml"
    inputs = {i["key"]: i["path"] for i in (prov or {}).get("inputs", []) if not i.get("builtin")}
    text = scenario.read_text()
    links = [
        (v, inputs[k])
        for k, v in referenced_paths(tomllib.loads(text))
        if k in inputs and not Path(v).is_absolute()
    ]
    if not links:
        return scenario
    depth = max(Path(v).parts.count("..") for v, _ in links)
    here = stage.joinpath(*(f"d{i}" for i in range(depth)))
    here.mkdir(parents=True)
    for v, target in links:
        link = Path(os.path.normpath(here / v))
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
    staged = here / "scenario.toml"
    staged.write_text(text)
    return staged
