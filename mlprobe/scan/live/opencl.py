"""OpenCL on this machine: pyopencl in a child process (a hanging driver costs one capture), its JSON
is the `mlprobe-opencl.json` capture that probes/opencl.py parses."""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

from ..capture import Capture, CaptureSpec
from . import _early
from ._early import CHILD
from .proc import communicate_or_kill


def live_capture(host: Any, s: CaptureSpec) -> Capture:
    """Enumerate through pyopencl in a child process, so a hanging driver costs one probe."""
    proc0 = _early.take()
    full = False
    while True:
        try:
            if proc0 is None:
                proc0 = _early.spawn(full_import=full)
            try:
                stdout, stderr = communicate_or_kill(proc0, s.timeout)
                _early.ended_at = time.perf_counter()
            except subprocess.TimeoutExpired:
                return Capture(s.name, "timeout",
                               error=f"OpenCL enumeration did not finish within {s.timeout:g} s")
        except OSError as exc:
            return Capture(s.name, "error", error=f"could not start the OpenCL child: {exc}")
        returncode = proc0.returncode
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
