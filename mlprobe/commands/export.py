"""`mlprobe export --to uv|pixi|conda`: what mlprobe decided for a machine (this one, or a replayed
capture), written for the tool the project lives in, so that its own lock and sync keep the build."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..errors import EXIT_OK, EXIT_USAGE, MlprobeError
from ..model.vocabulary import vocabulary
from .common import add_replay, print_json

if TYPE_CHECKING:
    from ..export.decide import Export

TARGETS = ("uv", "pixi", "conda")

EPILOG = """\
uv:    mlprobe export --to uv --framework torch --into pyproject.toml && uv lock && uv sync
       then, for the recipe's settings at every start of .venv's Python:
       mlprobe install --recipe RECIPE --venv .venv --settings-only
pixi:  mlprobe export --to pixi --replay GPU-NODE-CAPTURE --into pixi.toml && pixi lock
conda: env $(mlprobe export --to conda --replay GPU-NODE-CAPTURE) conda create --dry-run -n x pytorch-gpu

--into edits the file in place, keeping its content, order and comments, shows the diff, and changes
nothing when it is not valid TOML or already pins a package to another source (--force replaces it).
A second run changes nothing. Without --into the tables are printed.

exit codes: 0 written or printed; 2 usage (unknown --to, a file that is not TOML, a conflicting pin);
3 no recipe fits that machine."""


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("export", help="write mlprobe's choice into uv's, pixi's or conda's own files",
                       description="Write the build mlprobe chose (its index, the package pins, the settings, "
                                   "the machine's virtual packages) into the files uv, pixi or conda read, "
                                   "so that their own lock and sync keep it.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--to", metavar="TOOL", required=True, help=f"one of: {', '.join(TARGETS)}")
    p.add_argument("--framework", choices=("any",) + vocabulary().plan_frameworks(), default=None,
                   help="the first recipe the plan recommends for this framework")
    p.add_argument("--recipe", metavar="ID", help="the recipe (from `mlprobe plan`)")
    add_replay(p)
    p.add_argument("--fleet", metavar="REPORT", nargs="+",
                   help="(uv) one file for a fleet: the nodes' report files or a folder of them (as `fleet merge` "
                        "reads); each node's build gated by its platform markers")
    p.add_argument("--into", metavar="FILE", type=Path,
                   help="edit this file in place (pyproject.toml; pixi.toml or pyproject.toml; environment.yml)")
    p.add_argument("--force", action="store_true", help="replace a pin of the same package to another source")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


def _export(args: argparse.Namespace) -> "Export":
    from .. import pipeline
    from ..export.decide import decide
    from ..install.steps import pick
    from .common import host_source, make_host, scan_host

    host = make_host(args)
    report = pipeline.scan_report(host, host_source(host, args), scanner=scan_host)
    plan = pipeline.plan(report, framework=args.framework or "any")
    return decide(report, pick(plan, args.recipe))


def _fleet_export(args: argparse.Namespace) -> "Export":
    """The Exports of the fleet's nodes (each report's scan planned again here), combined."""
    from .. import pipeline, ui
    from ..errors import StageError
    from ..export.decide import decide
    from ..export.fleet import Node, combine, identical_builds
    from ..fleet.load import ReportFileError, read_report, select_inputs
    from ..install.steps import pick
    from ..model.facts import Facts

    files, notes = select_inputs(args.fleet)
    for n in notes:
        ui.note(n)
    if not files:
        raise MlprobeError("no report files in " + ", ".join(ui.display_path(str(p)) for p in args.fleet),
                           why="--fleet takes the report files (`mlprobe report -o NODE.json`) or a folder of them",
                           next_step="pass the folder `mlprobe fleet merge` reads", ref="E417", exit_code=EXIT_USAGE)
    nodes = []
    import os

    for i, path in enumerate(files):
        try:
            doc = read_report(path)
        except ReportFileError as exc:
            raise MlprobeError(f"cannot read a report: {exc}", next_step="pass files written by `mlprobe report -o "
                               "FILE.json` (or `mlprobe scan --json`)", ref="E902", exit_code=EXIT_USAGE) from None
        scan = doc.get("scan") if isinstance(doc.get("scan"), dict) else doc
        facts = Facts.from_report(scan)
        name = os.path.basename(path).rsplit(".", 1)[0]
        try:
            rec = pick(pipeline.plan(facts, framework=args.framework or "any"), args.recipe)
            nodes.append(Node(name, decide(facts, rec)))
        except StageError as exc:
            raise StageError(f"{name}: {exc.what}", why=exc.why, next_step=exc.next_step, ref=exc.ref,
                             kind=exc.kind) from None
        if (i + 1) % 200 == 0:
            ui.note(f"planned {i + 1} of {len(files)} nodes")
    return combine(identical_builds(nodes))


def run(args: argparse.Namespace) -> int:
    to = (args.to or "").strip().lower()
    if to not in TARGETS:
        raise MlprobeError(f"--to {args.to!r} is not a tool mlprobe exports for",
                           why=f"the accepted values are: {', '.join(TARGETS)}",
                           next_step="e.g. `mlprobe export --to uv --framework torch`", ref="E411", exit_code=EXIT_USAGE)
    if getattr(args, "fleet", None):
        if to != "uv":
            raise MlprobeError(f"--fleet exports for uv only, not for {to}",
                               why="pixi's system-requirements and conda's overrides describe one machine: "
                                   "the nodes of a fleet differ in CUDA, libc and CPU",
                               next_step=f"export each kind of node with `mlprobe export --to {to} --replay "
                                         "NODE-CAPTURE`", ref="E417", exit_code=EXIT_USAGE)
        if args.replay:
            raise MlprobeError("--fleet and --replay together", why="--fleet reads the nodes' reports itself",
                               next_step="drop --replay", ref="E417", exit_code=EXIT_USAGE)
        return _uv(args, _fleet_export(args))
    exp = _export(args)
    if to == "uv":
        return _uv(args, exp)
    if to == "pixi":
        return _pixi(args, exp)
    return _conda(args, exp)


def _say(lines: List[str]) -> None:
    from .. import ui

    for ln in lines:
        print(ui.safe(ln), file=sys.stderr)


def _settings_command(exp: "Export") -> str:
    if exp.title == "fleet":
        return "on each node, with its own recipe (" + ", ".join(exp.recipe.split(" + ")) + \
            "): mlprobe install --recipe RECIPE --venv .venv --settings-only"
    return f"mlprobe install --recipe {exp.recipe} --venv .venv --settings-only"


def _edit(path: Path, exp: "Export", kind: str, force: bool) -> Dict[str, Any]:
    """Edit a TOML file in place: {"changes", "diff", "text"}; nothing written when nothing changes."""
    from ..export import pixi, tomledit, uv

    old = tomledit.read_text(path)
    if old is None and kind == "uv":
        raise MlprobeError(f"--into {path} does not exist", why="uv's settings go into the project's pyproject.toml",
                           next_step="run `uv init` first, or pass the project's pyproject.toml", ref="E414",
                           exit_code=EXIT_USAGE)
    doc = tomledit.parse(old or "", str(path))
    if kind == "uv":
        changes = uv.apply(doc, exp, force=force, where=str(path))
    else:
        changes = pixi.apply(doc, exp, pyproject=path.name == "pyproject.toml", force=force, where=str(path))
    import tomlkit

    new = tomlkit.dumps(doc)
    if new and not new.endswith("\n"):
        new += "\n"
    tomledit.check_valid(new, str(path))
    if new != (old or ""):
        tomledit.write_atomically(path, new)
    return {"changes": changes, "diff": tomledit.diff(old or "", new, path.name), "text": new, "doc": doc}


def _requires_python(doc: Any) -> Optional[str]:
    try:
        return str(doc["project"]["requires-python"])
    except (KeyError, TypeError):
        return None


def _uv(args: argparse.Namespace, exp: "Export") -> int:
    from ..export import uv
    from ..export.decide import gate_notes

    notes = list(exp.notes)
    result: Dict[str, Any] = {}
    dotenv: Optional[str] = None
    if args.into:
        path = Path(args.into).expanduser()
        result = _edit(path, exp, "uv", args.force)
        notes += gate_notes(exp, _requires_python(result["doc"]))
        if exp.env:
            from ..export import tomledit

            env_path = path.parent / ".env"
            old_env = tomledit.read_text(env_path)
            dotenv = uv.dotenv_text(old_env, dict(exp.env))
            if dotenv != old_env:
                tomledit.write_atomically(env_path, dotenv)
                notes.append(f"the recipe's settings ({', '.join(exp.env)}) went into {env_path}: "
                             "`uv run --env-file .env …` reads it")
    else:
        result = {"text": uv.fragment(exp), "changes": [], "diff": ""}
        notes += gate_notes(exp, None)
        if exp.env:
            dotenv = uv.dotenv_text(None, dict(exp.env))
            notes.append(f"for a .env that `uv run --env-file .env` reads: {dotenv.strip()}")
    nxt = ["uv lock && uv sync",
           f"{_settings_command(exp)}   (the recipe's settings at every start of .venv's Python; "
           ".env reaches only `uv run`)"]
    if args.json:
        print_json({"schema": "mlprobe.export/1", "to": "uv", **_doc(exp), "into": str(args.into) if args.into else None,
                    "changes": result["changes"], "text": result["text"], "dotenv": dotenv, "notes": notes,
                    "next": nxt})
        return EXIT_OK
    if args.into:
        if result["changes"]:
            sys.stdout.write(result["diff"])
            _say([f"{args.into}: " + "; ".join(result["changes"])])
        else:
            _say([f"{args.into} already carries {exp.recipe}'s choice: nothing changed"])
    else:
        sys.stdout.write(result["text"])
    _say([f"note: {n}" for n in notes] + [f"next: {n}" for n in nxt])
    return EXIT_OK


def _pixi(args: argparse.Namespace, exp: "Export") -> int:
    from ..export import pixi

    notes = list(exp.notes)
    if args.into:
        result = _edit(Path(args.into).expanduser(), exp, "pixi", args.force)
    else:
        result = {"text": pixi.fragment(exp), "changes": [], "diff": ""}
    if exp.machine.cuda is None:
        notes.append("no CUDA driver in the capture: no system-requirements.cuda, so pixi solves CPU builds")
    if args.json:
        print_json({"schema": "mlprobe.export/1", "to": "pixi", **_doc(exp), "into": str(args.into) if args.into else None,
                    "changes": result["changes"], "text": result["text"], "notes": notes})
        return EXIT_OK
    if args.into:
        sys.stdout.write(result["diff"])
        _say([f"{args.into}: " + ("; ".join(result["changes"]) or "nothing changed")])
    else:
        sys.stdout.write(result["text"])
    _say([f"note: {n}" for n in notes] + ["next: pixi lock && pixi install"])
    return EXIT_OK


def _conda(args: argparse.Namespace, exp: "Export") -> int:
    from ..export import conda, tomledit

    lines = conda.env_lines(exp)
    yml = conda.environment_yml(exp)
    notes = list(exp.notes)
    if yml is None:
        notes.append(f"no environment.yml: no sourced row names a conda channel and package for {exp.recipe} "
                     "(knowledge/exports.json); the overrides still make a solve see that machine")
    written = None
    if args.into and yml is not None:
        path = Path(args.into).expanduser()
        old = tomledit.read_text(path)
        if old is not None and old != yml and not args.force:
            raise MlprobeError(f"--into {path} exists and differs from the environment mlprobe would write",
                               why="it is not mlprobe's to overwrite", next_step="pass --force, or another path",
                               ref="E413", exit_code=EXIT_USAGE)
        if old != yml:
            tomledit.write_atomically(path, yml)
        written = str(path)
    if args.json:
        print_json({"schema": "mlprobe.export/1", "to": "conda", **_doc(exp),
                    "overrides": dict(conda.overrides(exp)), "environment_yml": yml, "into": written, "notes": notes})
        return EXIT_OK
    sys.stdout.write(lines)
    if yml is not None and written is None:
        _say(["environment.yml (write it with --into environment.yml):"] + ["  " + ln for ln in yml.splitlines()])
    _say([f"note: {n}" for n in notes])
    return EXIT_OK


def _doc(exp: "Export") -> Dict[str, Any]:
    import dataclasses

    return {"recipe": exp.recipe, "machine": dataclasses.asdict(exp.machine),
            "indexes": [{"name": i.name, "url": i.url, "platforms": list(i.platforms), "python": i.python,
                         "marker": i.marker} for i in exp.indexes],
            "pins": [{"name": p.name, "requirement": p.requirement, "index": p.index, "marker": p.marker,
                      "why": p.why} for p in exp.pins],
            "env": dict(exp.env)}
