"""`mlprobe install --from-lock FILE` (the recommendation a lock carries) and `--unpin VENV`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EXIT_OK, EXIT_USAGE, MlprobeError, StageError

if TYPE_CHECKING:
    from ..model.plan import Recommendation


def recommendation_from_lock(path: Path) -> "Recommendation":
    """The recommendation a lock written by mlprobe carries; for another tool's lock, a plain one
    (its packages, no env vars, files or verify)."""
    from ..install.lock import read_lock, recommendation_of
    from ..model.plan import Recommendation

    lock = read_lock(Path(path).expanduser())
    rec = recommendation_of(lock)
    if rec is not None:
        return rec
    names = tuple(str(p.name) for p in lock.packages)
    if not names:
        raise StageError(f"the lock {path} lists no packages", ref="E532", kind="usage",
                         next_step="pass a lock with packages")
    return Recommendation(recipe="pylock", title=f"the packages of {Path(path).name}", packages=names)


def unpin_command(args: argparse.Namespace) -> int:
    from ..install.guard import TargetLock
    from ..install.pin import read_pins, unpin
    from .common import print_json

    venv = Path(args.unpin).expanduser().absolute()
    if not (venv / "pyvenv.cfg").is_file():
        raise MlprobeError(f"{venv} is not a virtual environment", why="it has no pyvenv.cfg",
                           next_step="pass the folder of a venv made by `mlprobe install --apply`",
                           ref="E534", exit_code=EXIT_USAGE)
    with TargetLock(str(venv)):
        before = read_pins(venv)
        done = unpin(venv)
    if args.json:
        print_json({"schema": "mlprobe.install-unpin/1", "venv": str(venv),
                    "unpinned": [p.requirement for p in before.pins] if before else [], "done": done})
        return EXIT_OK
    if not done:
        print(f"{venv} has no mlprobe pins: nothing to lift", file=sys.stderr)
        return EXIT_OK
    assert before is not None
    print(f"lifted the pins of {venv}: {', '.join(p.requirement for p in before.pins)}; pip and uv may now "
          "replace those builds (`mlprobe install --apply --venv` with a recipe pins again)", file=sys.stderr)
    for line in done:
        print(f"  {line}", file=sys.stderr)
    return EXIT_OK
