"""Fake tools that hang, first on PATH: every tool a scan runs (nvidia-smi, rocminfo, sycl-ls, amd-smi,
clinfo, …) is a shell script whose child sleeps (so a survivor would be the child, not the script).
Used by tests/test_scan_deadline.py and benchmarks/bench_hung_tools.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

MARK = "mlprobe-hung-tool"


def make_hung_tools(folder: Path) -> List[str]:
    """A script for every tool of the capture table, in `folder`; returns their names."""
    from mlprobe.scan.capture import SPECS

    folder.mkdir(parents=True, exist_ok=True)
    names = sorted({s.argv[0] for s in SPECS.values() if s.argv})
    for name in names:
        p = folder / name
        # the sleep is a child of the script, in its process group; its argv carries MARK
        p.write_text(f"#!/bin/sh\nexec /bin/sh -c 'sleep 600; : {MARK} {folder}' \n")
        p.chmod(0o755)
    return names


def survivors(folder: Path) -> List[str]:
    """Processes still running that one of these tools started."""
    import psutil

    out = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if str(folder) in cmd:
            out.append(f"{proc.pid}: {cmd}")
    return out


def run_with_deadline(command: List[str], folder: Path, deadline_s: float,
                      env: Optional[Dict[str, str]] = None) -> Tuple[float, float, int, str]:
    """`python -m mlprobe COMMAND` with the probe deadline set to deadline_s and the hung tools first
    on PATH. Returns (seconds to its output's first byte, seconds to its exit, exit status, stdout)."""
    code = ("import sys, mlprobe.scan.run as r; r.PROBE_DEADLINE_S = float(sys.argv[1]); "
            "from mlprobe.cli import main; sys.exit(main(sys.argv[2:]))")
    e = dict(env or os.environ)
    e["PATH"] = str(folder) + os.pathsep + "/usr/bin:/bin"
    t0 = time.perf_counter()
    # run from the tools' folder: `python -c` puts the working folder first on sys.path, and the
    # mlprobe imported must be the one PYTHONPATH names
    proc = subprocess.Popen([sys.executable, "-c", code, str(deadline_s), *command], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=e, cwd=str(folder))
    assert proc.stdout is not None
    first = os.read(proc.stdout.fileno(), 1)  # the output is written all at once, at the end: its first byte
    output_at = time.perf_counter() - t0
    out = first + proc.stdout.read()
    rc = proc.wait(timeout=300)
    return output_at, time.perf_counter() - t0, rc, out.decode("utf-8", "replace")
