"""`mlprobe labels`: Kubernetes node labels of this machine (or a replayed bundle) in the format of
node-feature-discovery's local feature source (features.d files of `name=value` lines)."""

from __future__ import annotations

import argparse
import json
import sys

from .. import ui
from ..errors import EXIT_USAGE, MlprobeError
from .common import add_replay, host_source, make_host, refuse_overwriting_an_input, replay_inputs


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..fleet.labels import DEFAULT_PREFIX, FEATURES_DIR

    p = sub.add_parser(
        "labels", help="Kubernetes node labels (node-feature-discovery features.d format)",
        description="Scan and plan this machine and print node labels for node-feature-discovery's local "
        f"feature source: x86-64 level, GPU vendor/count/compute capability/gfx target, CUDA driver, the "
        f"best backend per framework. Write them with -o {FEATURES_DIR}/mlprobe (atomically, as NFD asks).")
    add_replay(p)
    p.add_argument("--prefix", default=DEFAULT_PREFIX,
                   help=f"label namespace (default {DEFAULT_PREFIX}, which nfd-master accepts without "
                        "-extra-label-ns)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the features file here (atomically)")
    p.add_argument("--json", action="store_true", help="print the labels as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..fleet.labels import MAX_FILE_BYTES, features_file, label_problems, labels_for, prefix_problems
    from ..pipeline import build_report
    from ..report.envelope import ReportOptions

    problems = prefix_problems(args.prefix)
    if problems:
        raise MlprobeError(f"--prefix {ui.safe_line(args.prefix)} is not a label namespace NFD accepts",
                           why="; ".join(problems), next_step="pass e.g. --prefix example.com, or leave it out",
                           ref="E907", exit_code=EXIT_USAGE)
    if args.output:
        from .fleet import _check_output

        _check_output(args.output)
        refuse_overwriting_an_input(args.output, replay_inputs(args))
    host = make_host(args)
    with ui.progress("labels: scanning, planning"):
        doc = build_report(host, ReportOptions(), source=host_source(host, args)).to_json()
    labels = labels_for(doc, args.prefix)
    bad = {k: label_problems(k, v) for k, v in labels.items() if label_problems(k, v)}
    if bad:  # a bug, not the user's: say which label
        raise MlprobeError("a label mlprobe made is not valid for NFD", why=json.dumps(bad)[:500],
                           next_step="report this as a bug with `mlprobe report`", ref="E908")
    src = doc["scan"].get("source") or {}
    overrides = doc["scan"].get("overrides") or {}
    text = features_file(labels, f"replay of {src.get('bundle')}" if src.get("kind") == "replay" else None,
                         overrides if isinstance(overrides, dict) else None)
    if overrides:
        ui.note("labels made from overridden facts: "
                + ", ".join(f"{ui.safe_line(k)}={ui.safe_line(v)}" for k, v in overrides.items()))
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise MlprobeError("the labels exceed node-feature-discovery's 64 kB feature-file limit", ref="E909")
    if args.json:
        sys.stdout.write(json.dumps(labels, indent=2) + "\n")
    elif not args.output:
        sys.stdout.write(text)
    if args.output:
        ui.write_file(args.output, text)
        ui.note(f"wrote {len(labels)} labels to {ui.display_path(args.output)}")
    return 0
