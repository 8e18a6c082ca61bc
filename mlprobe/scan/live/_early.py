"""Start the OpenCL child process as the very first thing `mlprobe scan` does.

Enumerating OpenCL (pyopencl on PoCL: ~0.27 s) is the slowest capture; everything else in the scan
hides behind it, so it is started before the rest of mlprobe is even imported. Only `sys`, `os` and
`subprocess` are imported here. The Popen is handed to the OpenCL capture (scan/live/opencl.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Optional

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opencl_child.py")

started: Optional["subprocess.Popen[bytes]"] = None
started_at: float = 0.0


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
    # Its own process group, so a timeout can end it and anything it started.
    return subprocess.Popen(child_argv(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, start_new_session=os.name == "posix")


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
