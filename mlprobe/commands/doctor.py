"""`mlprobe doctor`: which link between the hardware and the framework is broken (build, driver,
compute capability, device nodes and permissions, container runtime, WSL, visibility variables,
library path, OpenCL loader), with the evidence and the fix. Exit 0 when nothing blocks, 1 when
something does."""

from __future__ import annotations

import argparse
import os

from ..errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, MlprobeError
from .common import add_replay, host_source, make_host, print_json, scan_host


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "doctor", help="why a framework does not see the GPU: the broken link, its evidence and the fix",
        description="Check each link from the hardware to the framework: the installed build, the driver, the "
                    "compute capability or gfx target, device nodes and permissions, containers, WSL, visibility "
                    "variables, the library path and the OpenCL loader. Exit 0 when nothing blocks, 1 when "
                    "something does.")
    add_replay(p)
    p.add_argument("--python", metavar="PATH",
                   help="the path of an interpreter (e.g. a venv's bin/python) whose frameworks are asked "
                        "what they see, instead of mlprobe's own")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object (`mlprobe schema doctor`)")
    p.set_defaults(func=run)


# doctor's own captures (children importing each framework, and the venv's interpreter starts): the
# slowest part of doctor, taken while the scan runs instead of after it
DOCTOR_PREFETCH = ("framework-devices.json", "loaded-libraries.json", "interpreter-starts.json")


def run(args: argparse.Namespace) -> int:
    from .. import pipeline, ui

    python = None
    if args.python:
        if args.replay:
            raise MlprobeError("--python asks an interpreter on this machine; it cannot go with --replay",
                               why="a replayed bundle carries its own frameworks' answer (framework-devices.json)",
                               next_step="leave out --replay, or leave out --python", ref="E301", exit_code=EXIT_USAGE)
        from ..verify.runner import resolve_python

        python = resolve_python(args.python)
    host = make_host(args)
    if host.kind == "live":
        from ..doctor.enumerate import install_producer

        install_producer()
        if python is None and hasattr(host, "prefetch"):
            host.prefetch(DOCTOR_PREFETCH)
    source = host_source(host, args)
    report = pipeline.scan_report(host, source, scanner=scan_host)
    with ui.progress("doctor: asking the frameworks, checking each link"):
        result = pipeline.doctor(host, python=os.path.abspath(python) if python else None, report=report,
                                 source=source, env=os.environ)
    if args.json:
        print_json(result.to_json())
    else:
        from ..render.doctor_terminal import render_doctor

        render_doctor(result, verbose=ui.verbose())
    return EXIT_FAILURE if result.verdict == "blocking" else EXIT_OK
