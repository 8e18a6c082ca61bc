"""Start the slow captures as the very first thing `mlprobe scan` does.

Enumerating OpenCL is the slowest capture; everything else in the scan hides behind it, so its child
is started before the rest of mlprobe is even imported (only `sys`, `os` and `subprocess` are
imported before it). The Popen is handed to the OpenCL capture (scan/live/opencl.py). Right after it,
the tool runs the scan always makes on a machine that has the tool (capture.EARLY: the nvidia-smi
queries, each a separate run of ~0.02-0.12 s that would otherwise run one after another inside the
nvidia probe) are started too, all at once; LiveHost.run takes each over by its capture name. One
that no probe takes (the probe stopped after a failure) is ended when mlprobe exits."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Optional

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opencl_child.py")

started: Optional["subprocess.Popen[bytes]"] = None
# perf_counter() when this module was imported (the first thing `mlprobe scan` does), when the
# OpenCL child was started, and when its output was read (scan -v prints them as a timeline)
T0: float = time.perf_counter()
started_at: float = 0.0
ended_at: float = 0.0


def child_argv() -> "list[str]":
    # -S skips site's .pth processing in the child (tens of ms); the parent's already-resolved
    # sys.path is passed instead, so the child finds pyopencl exactly where the parent would.
    return [sys.executable, "-S", CHILD]


def child_env() -> "dict[str, str]":
    env = dict(os.environ)
    paths = [p for p in sys.path if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # pyopencl imports numpy, whose BLAS starts a thread per core at import; the child does no
    # linear algebra, so one thread is enough (and saves start-up time on small machines).
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    return env


def spawn(full_import: bool = False) -> "subprocess.Popen[bytes]":
    """full_import: make the child `import pyopencl` instead of loading only its binding."""
    env = child_env()
    if full_import:
        env["MLPROBE_OPENCL_IMPORT"] = "full"
    # Its own process group (tracked by proc.py), so a timeout can end it and anything it started.
    from .proc import start_argv

    return start_argv(child_argv(), env)


def start_opencl_child() -> None:
    global started, started_at
    if started is None:
        try:
            started_at = time.perf_counter()
            started = spawn()
        except OSError:
            started = None


def take() -> Optional["subprocess.Popen[bytes]"]:
    """Hand over the early child once (a second caller starts its own)."""
    global started
    proc, started = started, None
    return proc


# capture name -> (the argv it was started with, its Popen, when it started)
_commands: "dict[str, tuple[list[str], subprocess.Popen[bytes], float]]" = {}


def start_tools() -> None:
    """Start the argv captures of capture.EARLY whose tool is on PATH (a PATH lookup each, no shell)."""
    import shutil

    from ..capture import EARLY, SPECS
    from .proc import start_argv

    for name in EARLY:
        argv = SPECS[name].argv
        if not argv or name in _commands:
            continue
        exe = shutil.which(argv[0])
        if exe is None:
            continue
        full = [exe] + list(argv[1:])
        try:
            _commands[name] = (full, start_argv(full), time.perf_counter())
        except OSError:
            continue
    if _commands:
        import atexit

        atexit.register(end_untaken)


def take_command(name: str, argv: "list[str]") -> "Optional[tuple[subprocess.Popen[bytes], float]]":
    """The early run of capture `name`, once, if it was started with exactly this argv."""
    got = _commands.get(name)
    if got is None or got[0] != argv:
        return None
    del _commands[name]
    return got[1], got[2]


def end_untaken() -> None:
    """End the early runs no probe asked for (their tool hangs, or the probe stopped before them)."""
    from .proc import kill_tree

    while _commands:
        _, (_argv, proc, _t) = _commands.popitem()
        kill_tree(proc)  # its leader may have exited while a child of it still runs: the group goes
        try:
            proc.communicate(timeout=1)
        except Exception:
            pass
