"""`mlprobe plan`: which stacks fit this machine (ranked, with exact commands), which do not and why,
and whether what is installed can use the hardware. `--json` for machines, `--why-not RECIPE` for one."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys

from ..errors import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, MlprobeError
from ..model.vocabulary import vocabulary
from ..urls import mask_doc
from .common import add_replay, host_source, make_host, print_json, scan_host


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "plan", help="which deep-learning stacks fit this machine, how to install them, and why not"
    )
    add_replay(p)
    p.add_argument(
        "--framework",
        choices=("any",) + vocabulary().plan_frameworks(),
        default="any",
        help="plan for one framework (default: any)",
    )
    p.add_argument("--python", metavar="X.Y", help="a version X.Y (never an interpreter): plan for that Python version "
                                                  "instead of the scanned one")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    p.add_argument(
        "--why-not", metavar="RECIPE", help="explain one recipe (id or alias, e.g. torch-rocm, neon)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.python is not None and not re.fullmatch(r"\d+\.\d+(\.\d+)?", args.python.strip()):
        raise MlprobeError(
            f"--python {args.python!r} is not a version like 3.11",
            next_step="pass the target interpreter's major.minor, e.g. --python 3.11",
            ref="E201",
            exit_code=EXIT_USAGE,
        )
    from .. import pipeline
    from ..model.contract import to_json
    from ..model.docversion import schema_id
    from ..plan.planner import explain_variants, why_not

    host = make_host(args)
    report = pipeline.scan_report(host, host_source(host, args), scanner=scan_host)
    plan = pipeline.plan(report, framework=args.framework, python=args.python, env=os.environ, host=host)
    from ..plan.multigpu import VARIABLES, gpu_use

    # How many GPUs each framework will use: the host's environment (host.json on replay) decides.
    plan = dataclasses.replace(plan, gpu_use=tuple(gpu_use(plan, report, {v: host.env(v) for v in VARIABLES})),
                               source=report.source)
    if args.why_not:
        try:
            doc = why_not(plan, args.why_not)
        except KeyError:
            from ..recipes import load_recipes

            ids = ", ".join(r.id for r in load_recipes())
            raise MlprobeError(
                f"no recipe called {args.why_not!r}",
                why=f"known recipes: {ids}",
                next_step="pass one of those ids (aliases such as neon or ncsdk work too)",
                ref="E202",
                exit_code=EXIT_USAGE,
            ) from None
        doc = {"schema": schema_id("why-not"), **doc}
        doc["variants"] = [to_json(v) for v in explain_variants(report, str(doc["recipe"]), python=args.python)]
        doc["target"] = plan.to_json()["target"]
        if args.json:
            print_json(mask_doc(doc))
        else:
            from ..render.plan_terminal import render_why_not

            render_why_not(mask_doc(doc))
        return 0
    # A mirror's password (MLPROBE_PYTORCH_INDEX_URL=https://user:pw@...) is shown as pip shows it.
    shown = mask_doc(plan.to_json())
    if args.json:
        print_json(shown)
    else:
        from ..render.plan_terminal import render_plan

        render_plan(shown)
    sys.stdout.flush()
    # the plan is printed either way; "nothing fits" is the promised exit status 3 (docs/exit-codes.md)
    return EXIT_OK if plan.recommended else EXIT_UNAVAILABLE
