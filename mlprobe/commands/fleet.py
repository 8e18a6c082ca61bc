"""`mlprobe fleet scan|merge|show`: many machines in one report.

scan: one task per alive node of a Ray cluster (`mlprobe[ray]`); merge: `mlprobe report` files
gathered any other way; show: a fleet report as tables, JSON or one self-contained HTML page."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional

from .. import ui
from ..errors import EXIT_FAILURE, EXIT_USAGE, MlprobeError
from ..model import jsondoc
from ..model.jsontypes import JsonObject
from .common import keep_seconds, refuse_overwriting_an_input, seconds

if TYPE_CHECKING:
    from ..fleet.model import FleetDocument

# A fleet report with every node's full report embedded can be large; anything beyond this is not one.
MAX_FLEET_BYTES = 1024 * 1024 * 1024
DEFAULT_TIMEOUT_S = 120.0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..cli import _add_verbosity

    p = sub.add_parser(
        "fleet", help="many machines: scan a Ray cluster, merge report files, show a fleet report",
        description="Scan every node of a Ray cluster (or merge `mlprobe report` files), group the nodes "
        "by hardware, plan per group and show which nodes drifted from their group's driver or "
        "framework builds.")
    fs = p.add_subparsers(dest="fleet_command", metavar="SUBCOMMAND")

    s = fs.add_parser("scan", help="one scan task per alive node of a Ray cluster (needs mlprobe[ray])",
                      description="Run `mlprobe report`'s scan and plan on every alive node of a Ray cluster, "
                      "each task pinned to its node. A node that dies, times out or lacks mlprobe is "
                      "reported with its status; the others are kept. Exit 1 when any node has no report.")
    s.add_argument("--address", default=None,
                   help="the cluster's address, HOST:PORT of its head (default: RAY_ADDRESS, else 'auto': "
                        "the cluster this machine belongs to)")
    s.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"time limit for the whole scan; nodes without an answer by then are 'timeout' "
                        f"(default {DEFAULT_TIMEOUT_S:g})")
    s.add_argument("--verify", action="store_true", help="also run verify on each live node (slow)")
    s.add_argument("--keep-agents", type=keep_seconds, default=0.0, metavar="S",
                   help="leave one idle scan worker per node (a detached Ray actor, no CPU reserved) for S "
                        "seconds after the scan, so a repeat scan within that time skips Ray's start of a new "
                        "worker process on every node; each ends itself when idle that long "
                        "(default 0: nothing is left running)")
    s.add_argument("--json", action="store_true", help="print the fleet report as JSON")
    s.add_argument("-o", "--output", metavar="FILE", help="write the fleet report (JSON) here")
    s.set_defaults(func=run_scan)

    m = fs.add_parser("merge", help="a fleet report from `mlprobe report` files",
                      description="Build the fleet report from report files gathered any way (ssh, Slurm, "
                      "configuration management). A folder stands for the *.json files in it.")
    m.add_argument("files", nargs="+", metavar="FILE", help="report files (or folders of them)")
    m.add_argument("--skip-bad", action="store_true",
                   help="leave out files that are not readable reports (listed as warnings) instead of stopping")
    m.add_argument("--embed-reports", action="store_true",
                   help="keep each node's whole report in the fleet report (large for big fleets)")
    m.add_argument("--jobs", type=jobs_count, default=None, metavar="N",
                   help="read the files in N processes (default: one per core from "
                        "2,000 files on, else 1); the report is the same for any N")
    m.add_argument("--ray", action="store_true",
                   help="read the files as Ray tasks on a cluster whose nodes see the same files (a shared "
                        "file system); needs mlprobe[ray] on every node")
    m.add_argument("--address", default=None,
                   help="with --ray: the cluster's address, HOST:PORT of its head (default: RAY_ADDRESS, "
                        "else 'auto': the cluster this machine belongs to; 'local': a Ray of this machine "
                        "alone, started for this merge)")
    m.add_argument("--json", action="store_true", help="print the fleet report as JSON")
    m.add_argument("-o", "--output", metavar="FILE", help="write the fleet report (JSON) here")
    m.set_defaults(func=run_merge)

    sh = fs.add_parser("show", help="print a fleet report as tables (or JSON, or an HTML page)")
    sh.add_argument("file", metavar="FILE", help="a fleet report (`fleet scan -o` or `fleet merge -o`)")
    sh.add_argument("--json", action="store_true", help="print it as JSON")
    sh.add_argument("--html", metavar="OUT", help="write one self-contained HTML page here")
    sh.add_argument("--all", action="store_true", help="every node and drift row, however many")
    sh.set_defaults(func=run_show)

    for sp in fs.choices.values():
        _add_verbosity(sp, argparse.SUPPRESS)
    def no_subcommand(_args: argparse.Namespace) -> int:
        p.print_help()
        return EXIT_USAGE

    p.set_defaults(func=no_subcommand)


def _check_output(path: Optional[str]) -> None:
    if not path:
        return
    pp = Path(path)
    if pp.is_dir() or not pp.parent.is_dir():
        raise MlprobeError(f"cannot write to {ui.display_path(path)}",
                           why="it is a folder" if pp.is_dir() else f"the folder {ui.display_path(pp.parent)} does not exist",
                           next_step="pass a file in a folder that exists", ref="E905", exit_code=EXIT_USAGE)


# Indented JSON goes through Python's pure-Python encoder (several times slower than the C one); a
# fleet larger than this is written compact.
INDENT_NODES = 500


def fleet_json(doc: JsonObject) -> str:
    nodes = doc.get("nodes")
    if isinstance(nodes, list) and len(nodes) <= INDENT_NODES:
        return jsondoc.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    return jsondoc.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"


def _emit(fleet: "FleetDocument", args: argparse.Namespace) -> None:
    doc = fleet.to_json()
    if args.output:
        ui.write_file(args.output, fleet_json(doc))
        ui.note(f"wrote {ui.display_path(args.output)} ({fleet.summary.nodes} nodes, "
                f"{fleet.summary.groups} groups); show it with: mlprobe fleet show {ui.display_path(args.output)}")
    if args.json:
        sys.stdout.write(fleet_json(doc))
    elif not args.output:
        from ..fleet.render import render_fleet

        render_fleet(doc)  # the document's text made safe for the terminal first (ui.deep_safe)


def run_scan(args: argparse.Namespace) -> int:
    from ..fleet.ray_scan import scan_fleet

    _check_output(args.output)
    address = args.address or os.environ.get("RAY_ADDRESS") or "auto"

    def event(name: str, status: str, secs: Optional[float], detail: str) -> None:
        line = f"node {name}: {status}" + (f" in {secs:.1f} s" if secs is not None else "") + \
            (f" ({detail})" if detail else "")
        if ui.progress_enabled():
            print(ui.safe_line(line), file=sys.stderr)
        else:
            ui.debug(line)

    with ui.progress(f"fleet scan of {address}"):
        fleet = scan_fleet(address, args.timeout, verify=args.verify, on_event=event,
                           keep_agents_s=args.keep_agents)
    _emit(fleet, args)
    return 0 if all(n.status == "ok" for n in fleet.nodes) else EXIT_FAILURE


def jobs_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (1 or more)")
    return n


def run_merge(args: argparse.Namespace) -> int:
    from ..fleet.load import expand_inputs
    from ..fleet.merge import merge, merge_embedded

    _check_output(args.output)
    if args.output:
        refuse_overwriting_an_input(args.output, expand_inputs(args.files))
    if args.address and not args.ray:
        raise MlprobeError("--address is for --ray", next_step="add --ray, or leave out --address",
                           ref="E910", exit_code=EXIT_USAGE)
    if args.ray and args.embed_reports:
        raise MlprobeError("--embed-reports is not read on Ray", why="every whole report would cross the cluster",
                           next_step="leave out --ray or --embed-reports", ref="E910", exit_code=EXIT_USAGE)

    def progress(done: int, total: int) -> None:
        ui.debug(f"read {done}/{total} reports")

    def on_ray(cpus: int) -> None:
        ui.debug(f"fleet merge on Ray: {cpus} CPU(s) in the cluster")

    with ui.progress("fleet merge: reading reports"):
        if args.embed_reports:
            fleet = merge_embedded(args.files, skip_bad=args.skip_bad, on_progress=progress)
        else:
            address = (args.address or os.environ.get("RAY_ADDRESS") or "auto") if args.ray else None
            merged = merge(args.files, skip_bad=args.skip_bad, on_progress=progress, jobs=args.jobs,
                           ray_address=address, on_ray=on_ray)
    if args.embed_reports:
        for w in fleet.warnings:
            ui.note(f"warning: {w}")
        _emit(fleet, args)
        return 0
    for w in merged.warnings:
        ui.note(f"warning: {w}")
    if len(merged.names) <= INDENT_NODES or not (args.output or args.json):
        _emit(merged.document(), args)  # indented, or the terminal tables
        return 0
    # a large fleet: written as it is made, never whole in memory
    if args.output:
        ui.write_chunks(args.output, merged.chunks())
        s = merged.summary
        ui.note(f"wrote {ui.display_path(args.output)} ({s.nodes} nodes, {s.groups} groups); show it with: "
                f"mlprobe fleet show {ui.display_path(args.output)}")
    if args.json:
        sys.stdout.flush()
        for piece in merged.chunks():
            sys.stdout.buffer.write(piece)
        sys.stdout.buffer.flush()
    return 0


def read_fleet(path: str) -> Dict[str, Any]:
    from ..fleet.document import is_fleet
    from ..model.docversion import VersionError, upgraded, version_of
    from ..scan.capture import UnreadableFile, read_regular

    shown = ui.display_path(path)

    def bad(why: str) -> MlprobeError:
        return MlprobeError(f"cannot read the fleet report {shown}", why=why,
                            next_step="pass a file written by `mlprobe fleet scan -o FILE` or "
                                      "`mlprobe fleet merge -o FILE`", ref="E906", exit_code=EXIT_USAGE)

    try:
        data = read_regular(path, MAX_FLEET_BYTES + 1)
    except FileNotFoundError:
        raise bad("no such file") from None
    except UnreadableFile as exc:
        raise bad(ui.display_path(str(exc))) from None
    if len(data) > MAX_FLEET_BYTES:
        raise bad("larger than 1 GiB")
    try:
        doc = jsondoc.loads(data)
    except UnicodeDecodeError:
        raise bad("the bytes are not UTF-8 text") from None
    except jsondoc.BadNumber as exc:
        raise bad(ui.display_path(str(exc))) from None
    except json.JSONDecodeError as exc:
        raise bad(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise bad("JSON nested too deeply to read") from None
    if not isinstance(doc, dict) or not (is_fleet(doc) or "fleet_version" in doc
                                         or str(doc.get("schema", "")).startswith("mlprobe.fleet/")):
        hint = " (it looks like a node report: merge node reports with `mlprobe fleet merge`)" \
            if isinstance(doc, dict) and ("report_version" in doc or "scan" in doc) else ""
        raise bad('it has no "schema": "mlprobe.fleet/N": not a fleet report' + hint)
    try:
        version_of(doc, "fleet")
    except VersionError as exc:
        raise bad(str(exc)) from None
    out: Dict[str, Any] = upgraded(doc, "fleet")
    shape = {"summary": dict, "nodes": list, "groups": list, "drift": list}
    for key, kind in shape.items():
        if not isinstance(out.get(key), kind):
            raise bad(f"{key} is missing or not a JSON {'object' if kind is dict else 'list'}")
    return out


def run_show(args: argparse.Namespace) -> int:
    refuse_overwriting_an_input(args.html, [args.file], "--html")
    doc = read_fleet(args.file)
    if args.html:
        from ..fleet.html import render_html

        _check_output(args.html)
        try:
            page = render_html(doc)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise MlprobeError(f"cannot show {ui.display_path(args.file)}",
                               why=f"a field is not what a fleet report holds ({type(exc).__name__}: {exc})",
                               next_step="regenerate it with `mlprobe fleet merge` or `fleet scan`",
                               ref="E906", exit_code=EXIT_USAGE) from None
        ui.write_file(args.html, page)
        ui.note(f"wrote {ui.display_path(args.html)} (one self-contained page)")
        if not args.json:
            return 0
    if args.json:
        sys.stdout.write(fleet_json(doc))
        return 0
    from ..fleet.render import render_fleet

    try:
        render_fleet(doc, all_rows=args.all)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise MlprobeError(f"cannot show {ui.display_path(args.file)}",
                           why=f"a field is not what a fleet report holds ({type(exc).__name__}: {exc})",
                           next_step="regenerate it with `mlprobe fleet merge` or `fleet scan`",
                           ref="E906", exit_code=EXIT_USAGE) from None
    return 0
