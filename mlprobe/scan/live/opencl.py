"""OpenCL on this machine: pyopencl in a child process (a hanging driver costs one capture), its JSON
is the `mlprobe-opencl.json` capture that probes/opencl.py parses."""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any, List

from ..capture import Capture, CaptureSpec
from . import _early
from ._early import CHILD
from .proc import communicate_or_kill, kill_tree


# How long the scan waits for the OpenCL child to exit after it closed its output.
EXIT_GRACE_S = 0.01


def _complete(stdout: bytes) -> bool:
    """One whole JSON object: the child's answer, written before it closed its output."""
    try:
        return isinstance(json.loads(stdout.decode("utf-8", "replace")), dict)
    except ValueError:
        return False


_ending: "List[subprocess.Popen[bytes]]" = []


def _still_ending(proc: "subprocess.Popen[bytes]") -> None:
    """A child that gave its answer and is still ending: should it still run when mlprobe exits (a
    driver that hangs in its teardown), its process group is ended then; nothing outlives mlprobe."""
    if not _ending:
        import atexit

        atexit.register(_end_children)
    _ending.append(proc)


def _end_children() -> None:
    while _ending:
        proc = _ending.pop()
        kill_tree(proc)


def live_capture(host: Any, s: CaptureSpec) -> Capture:
    """Enumerate through pyopencl in a child process, so a hanging driver costs one probe."""
    proc0 = _early.take()
    full = False
    while True:
        began = time.perf_counter()
        try:
            if proc0 is None:
                proc0 = _early.spawn(full_import=full)
            try:
                # The child closes its output once its answer is written, then ends (a GPU driver's
                # teardown): that end is waited for only briefly.
                stdout, stderr = communicate_or_kill(proc0, s.timeout, exit_grace=EXIT_GRACE_S)
                _early.ended_at = time.perf_counter()
                returncode = proc0.returncode
                if returncode is None and not _complete(stdout):
                    # closed its output without an answer: its exit status says what happened
                    try:
                        returncode = proc0.wait(timeout=max(0.1, s.timeout - (time.perf_counter() - began)))
                    except subprocess.TimeoutExpired:
                        kill_tree(proc0)
                        raise
            except subprocess.TimeoutExpired:
                return Capture(s.name, "timeout",
                               error=f"OpenCL enumeration did not finish within {s.timeout:g} s")
        except OSError as exc:
            return Capture(s.name, "error", error=f"could not start the OpenCL child: {exc}")
        if returncode is None:
            returncode = 0  # a complete answer; the child is still ending and ends on its own
            _still_ending(proc0)
        # The fast child loads only pyopencl's binding; should that ever crash where the full
        # package works, ask once more the ordinary way.
        if returncode is not None and returncode < 0 and not full and \
                os.environ.get("MLPROBE_OPENCL_IMPORT") != "full":
            full, proc0 = True, None
            continue
        break
    proc = subprocess.CompletedProcess([CHILD], returncode, stdout, stderr)
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        return Capture(s.name, "error", error=f"OpenCL child exited with status {proc.returncode}: {tail[0]}")
    try:
        doc = json.loads(proc.stdout.decode(errors="replace"))
    except ValueError:
        return Capture(s.name, "error", error="OpenCL child printed no JSON")
    if doc.get("absent"):
        return Capture(s.name, "absent", error=doc.get("error"))
    return Capture(s.name, "ok", data=proc.stdout)
