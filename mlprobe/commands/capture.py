"""`mlprobe capture DIR`: write a capture bundle of this machine (see docs/CAPTURES.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import ui
from ..errors import EXIT_FAILURE, EXIT_USAGE, MlprobeError


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("capture", help="write the raw outputs mlprobe reads into a bundle folder")
    p.add_argument("dir", help="folder to write (created; must be empty if it exists)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..doctor.enumerate import install_producer
    from ..scan.host import UNREDACTED_NOTICE, shared_live_host, write_bundle

    from ..model.folders import cause_and_next, real_folder

    given = Path(args.dir)
    folder = real_folder(given)  # a symlink to a folder: the bundle goes where it leads, as install --venv does
    if folder != Path(os.path.abspath(given)) and given.is_symlink():
        ui.note(f"{given} is a symlink to {folder}: the bundle is written there")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise MlprobeError(
            f"{folder} exists and is not an empty folder",
            why="a bundle is one machine's captures; mixing two would replay as neither",
            next_step="pass a new folder name", ref="E102", exit_code=EXIT_USAGE,
        )
    made = [d for d in [folder, *folder.parents] if not os.path.lexists(d)]  # the folders this run makes
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MlprobeError(
            f"cannot create the folder {folder}", why=exc.strerror or str(exc),
            next_step="pass a folder name in a place you can write to", ref="E103", exit_code=EXIT_USAGE,
        ) from None
    install_producer()  # the frameworks' own device enumeration (framework-devices.json)
    try:
        caps = write_bundle(shared_live_host(), folder)
    except OSError as exc:
        for d in made:  # innermost first; write_bundle left nothing in them
            try:
                d.rmdir()
            except OSError:
                break
        left = "nothing was left behind" if made else f"{folder} is as it was, empty"
        why, step = cause_and_next(exc, folder)
        raise MlprobeError(
            f"cannot write the bundle {folder}", why=why, next_step=f"{left}; {step}", ref="E104",
            exit_code=EXIT_FAILURE,
        ) from None
    written = sorted(n for n, c in caps.items() if c.status == "ok")
    failed = sorted(f"{n} ({c.status}: {c.error})" for n, c in caps.items() if c.status in ("error", "timeout"))
    print(f"wrote {len(written)} captures to {folder}: {', '.join(written)}")
    for f in failed:
        ui.note(f"  not captured: {ui.safe(f)}")
    print(f"replay with: mlprobe scan --replay {folder}")
    # Always said, --quiet or not: the bundle is the machine's raw data.
    print(f"note: the bundle is NOT redacted (host names, serial numbers, paths and environment variables "
          f"are in it as the tools printed them; {folder / UNREDACTED_NOTICE} says so too); to share it, "
          f"use `mlprobe report --replay {folder}`, which is redacted", file=sys.stderr)
    return 0
