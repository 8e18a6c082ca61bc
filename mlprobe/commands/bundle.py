"""`mlprobe bundle`: the wheels and a lock of a recipe for another machine (one without internet),
made here from that machine's report; `--fleet` makes one per group of identical machines."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ..model.docversion import schema_id
from ..model.vocabulary import vocabulary
from .common import print_json

if TYPE_CHECKING:
    from ..install.bundle import BundleResult, BundleTarget
    from ..model.facts import Facts
    from ..install.steps import InstallOptions, InstallPlan

EPILOG = """\
The recipe is planned for the machine in the report (its GPUs, drivers, OS), and its wheels are
resolved for that machine's Python version and wheel tags (glibc, OS, architecture), not this
one's. pip fetches them through the same sources as `mlprobe install`: the recipe's own index, or
--index-url / --find-links / --use-pip-config. DIR gets the wheels, pylock.toml (PEP 751: every
file with its sha256) and README.md; it is written beside DIR and renamed at the end, so Ctrl-C
or a failure leaves nothing half-written. On the other machine, in DIR:

  mlprobe install --from-lock pylock.toml --find-links . --no-index --apply --venv VENV

--reuse-installed leaves out what that machine's Python already has at the version the resolution
picks (read from pip-list.txt in its capture bundle): the venv there must see those packages
(`python3 -m venv --system-site-packages`).

exit codes: 0 written; 2 usage (DIR not empty, a report without Python tags, bad options);
3 no recipe fits, or no wheel for that machine (the package and the tags are named); 130 interrupted."""


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("bundle", help="wheels and a lock of a recipe for another (offline) machine, from its report",
                       description="Resolve a recipe for the machine in a report or capture bundle, download "
                                   "its wheels for that machine's Python and platform, and write them with a "
                                   "PEP 751 pylock.toml and a README into a new folder.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--replay", metavar="REPORT_OR_BUNDLE",
                      help="the machine: a capture bundle folder, or a report made with --include-raw")
    what.add_argument("--fleet", metavar="FLEET.json", type=Path,
                      help="a fleet report (`mlprobe fleet scan` or `fleet merge --embed-reports`): one "
                           "bundle per group of identical machines")
    p.add_argument("--recipe", metavar="ID", help="the recipe (from `mlprobe plan --replay …`)")
    p.add_argument("--framework", choices=("any",) + vocabulary().plan_frameworks(), default=None,
                   help="the first recipe the plan recommends for this framework")
    p.add_argument("-o", "--output", metavar="DIR", type=Path, required=True,
                   help="a new (or empty) folder for the bundle")
    p.add_argument("--reuse-installed", action="store_true",
                   help="leave out the packages that machine already has (from pip-list.txt in its capture)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    src = p.add_argument_group("sources (as for `mlprobe install`)")
    src.add_argument("--index-url", metavar="URL")
    src.add_argument("--extra-index-url", metavar="URL", action="append", default=[])
    src.add_argument("--find-links", metavar="DIR", action="append", default=[])
    src.add_argument("--no-index", action="store_true")
    src.add_argument("--use-pip-config", action="store_true")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace) -> "InstallOptions":
    from ..install.steps import InstallOptions

    links = tuple(x if "://" in x else str(Path(x).expanduser().absolute()) for x in args.find_links)
    return InstallOptions(framework=args.framework or "any", recipe=args.recipe, index_url=args.index_url,
                          extra_index_urls=tuple(args.extra_index_url), find_links=links,
                          no_index=args.no_index, use_pip_config=args.use_pip_config)


def parse_installed(text: str) -> Dict[str, str]:
    """`pip list` (columns) or `pip freeze` (name==version) -> {name: version} (pure)."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("Package ", "---", "#", "-e ")):
            continue
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\s*==\s*|\s+)([0-9][^\s]*)(?:\s|$)", s)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _plan_for(report: "Facts", args: argparse.Namespace, opts: "InstallOptions"
              ) -> Tuple["InstallPlan", "BundleTarget"]:
    from .. import pipeline
    from ..install.bundle import bundle_target
    from ..install.steps import build_plan, pick

    target = bundle_target(report)
    plan = pipeline.plan(report, framework=args.framework or "any", python=None, env=os.environ)
    rec = pick(plan, args.recipe)
    iplan = build_plan(rec, opts)
    if iplan.variant_label and iplan.sources.origin != "recipe":
        from ..install.resolve import pin_variants

        iplan.packages, notes = pin_variants([sys.executable, "-m", "pip"], iplan.packages, iplan.variant_label,
                                             iplan.sources, python_version=target.major_minor)
        iplan.notes.extend(notes)
    return iplan, target


def _log_path(name: str) -> Path:
    """install's log folder (mlprobe's own, made for this user only), a bundle-… file in it."""
    from ..install.apply import default_log_path
    from ..install.guard import private_dir

    path = default_log_path(name, "bundle")
    private_dir(path.parent)
    return path


def _make(iplan: "InstallPlan", target: "BundleTarget", out: Path, made_from: str,
          provided: Optional[Mapping[str, str]]) -> "BundleResult":
    from .. import ui
    from ..install.bundle import make_bundle

    with ui.progress(f"bundle {iplan.recipe} for {target.description}") as update:
        def on_line(text: str) -> None:
            update(text[:150])
            if ui.verbose():
                ui.debug(text)

        return make_bundle(iplan, target, out, [sys.executable, "-m", "pip"], made_from=made_from,
                           provided=provided, log=_log_path(iplan.recipe), on_line=on_line)


def _say(result: "BundleResult", lines: List[str]) -> None:
    from .. import ui

    mib = result.total_bytes / 1048576
    print(ui.safe(f"bundle written: {result.folder} ({len(result.files)} wheel(s), {mib:.1f} MiB) for "
                  f"{result.target.description}"))
    for ln in lines:
        print(ui.safe(f"  {ln}"))
    if result.provided:
        print(ui.safe(f"  left out (the machine has them): {', '.join(result.provided)}"))
    print(ui.safe(f"  on that machine, in {result.folder.name}/: mlprobe install --from-lock pylock.toml "
                  "--find-links . --no-index --apply --venv VENV"))


def run(args: argparse.Namespace) -> int:
    from ..errors import EXIT_OK, EXIT_USAGE, MlprobeError
    from ..install.bundle import check_empty_target

    if args.recipe is None and args.framework is None:
        raise MlprobeError("bundle needs --recipe ID or --framework F", why="it makes one recipe's bundle",
                           next_step="`mlprobe plan --replay REPORT` lists the recipes that fit that machine",
                           ref="E538", exit_code=EXIT_USAGE)
    from ..model.folders import real_folder

    out = real_folder(Path(args.output))  # a symlink to an (empty) folder: written where it leads
    check_empty_target(out)
    opts = _options(args)
    if args.fleet:
        return _run_fleet(args, opts, out)
    from .. import pipeline
    from .common import host_source, make_host

    host = make_host(args)
    report = pipeline.scan_report(host, host_source(host, args))
    iplan, target = _plan_for(report, args, opts)
    provided = None
    if args.reuse_installed:
        cap = host.get("pip-list.txt")
        if not cap.ok:
            raise MlprobeError("--reuse-installed: the bundle has no pip-list.txt",
                               why="the packages of that machine's Python are not in its capture",
                               next_step="capture that machine again with `mlprobe capture DIR` (it writes "
                                         "pip-list.txt), or put `python -m pip list > pip-list.txt` beside it, "
                                         "or leave out --reuse-installed", ref="E546", exit_code=EXIT_USAGE)
        provided = parse_installed(cap.text())
    result = _make(iplan, target, out, str(args.replay), provided)
    if args.json:
        print_json({"schema": schema_id("bundle"), "recipe": iplan.recipe, **result.to_dict()})
    else:
        _say(result, iplan.notes)
    return EXIT_OK


def _run_fleet(args: argparse.Namespace, opts: "InstallOptions", out: Path) -> int:
    """One bundle per group of machines that get the same one (same recipe and env for the same Python
    and tags), into DIR/<recipe>-<tags>-<digest>/, and DIR/fleet-bundles.json naming each node's."""
    import json
    import shutil

    from ..errors import EXIT_OK, EXIT_USAGE, MlprobeError, StageError
    from ..fleet.document import is_fleet
    from ..install.bundle import group_key, partial_folder
    from ..model.facts import Facts as FactsType
    from ..scan.capture import UnreadableFile, read_regular

    try:
        doc = json.loads(read_regular(args.fleet, 512 * 1024 * 1024).decode("utf-8"))
        if not is_fleet(doc):
            raise ValueError('not a fleet report (no "schema": "mlprobe.fleet/N" and nodes)')
    except (OSError, UnreadableFile, ValueError, RecursionError) as exc:
        raise MlprobeError(f"cannot read the fleet report {args.fleet}", why=str(exc),
                           next_step="pass a file from `mlprobe fleet scan` or `fleet merge --embed-reports`",
                           ref="E906", exit_code=EXIT_USAGE) from None
    nodes = [n for n in doc.get("nodes") or [] if isinstance(n, dict)]
    groups: Dict[str, Tuple["InstallPlan", "BundleTarget", List[str]]] = {}
    skipped: List[str] = []
    for n in nodes:
        report = n.get("report")
        name = str(n.get("name"))
        if n.get("status") != "ok" or not isinstance(report, dict):
            skipped.append(f"{name}: no report in the fleet file")
            continue
        scan: Dict[str, Any] = report["scan"] if isinstance(report.get("scan"), dict) else report
        try:
            iplan, target = _plan_for(FactsType.from_report(scan), args, opts)
        except StageError as exc:
            skipped.append(f"{name}: {exc.what}")
            continue
        key = group_key(iplan, target)
        groups.setdefault(key, (iplan, target, []))[2].append(name)
    if not groups:
        raise MlprobeError("no node of the fleet gets a bundle", why="; ".join(skipped[:6]) or "no nodes",
                           next_step="make the fleet report with the nodes' reports (`fleet merge "
                                     "--embed-reports`, or `fleet scan`)", ref="E544", exit_code=EXIT_USAGE)
    tmp = partial_folder(out)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    index: Dict[str, Any] = {"schema": schema_id("fleet-bundles"), "fleet": str(args.fleet), "bundles": [],
                             "skipped": skipped}
    try:
        for key, (iplan, target, members) in sorted(groups.items()):
            result = _make(iplan, target, tmp / key, f"{len(members)} node(s) of {args.fleet}", None)
            index["bundles"].append({"folder": key, "recipe": iplan.recipe, "nodes": members,
                                     **{k: v for k, v in result.to_dict().items() if k != "folder" and k != "lock"}})
        (tmp / "fleet-bundles.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            out.rmdir()
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if args.json:
        print_json({**index, "output": str(out)})
    else:
        for b in index["bundles"]:
            print(f"{out / b['folder']}: {b['recipe']} for {b['target']} ({len(b['files'])} wheel(s)) — "
                  f"{', '.join(b['nodes'])}")
        for s in skipped:
            print(f"  skipped {s}", file=sys.stderr)
    return EXIT_OK
