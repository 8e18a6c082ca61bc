"""A tool's output is read as it is written and the tool is stopped at the cap: a `rocminfo` that
prints far more than any real one, or an `nvidia-smi` that never stops, costs about the cap in memory
and ends at once, not at its timeout (or in a MemoryError). A `--python` target that spews costs
verify a clear error, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from mlprobe.scan.host import LiveHost

from .conftest import ROOT

MiB = 1024 * 1024
posix_only = pytest.mark.skipif(os.name != "posix", reason="fake tools are shell scripts")


def _tool(folder: Path, name: str, body: str) -> Path:
    p = folder / name
    p.write_text(f"#!{sys.executable}\nimport sys, time\nout = sys.stdout.buffer\n{body}\n", encoding="utf-8")
    p.chmod(0o755)
    return p


@posix_only
def test_a_tool_that_never_stops_is_stopped_at_the_cap(tmp_path: Path) -> None:
    # 24 MiB, then it hangs: the cap (2 MiB) is reached long before the time limit
    tool = _tool(tmp_path, "nvidia-smi", "for _ in range(384):\n    out.write(b'x' * 65536)\nout.flush()\n"
                                         "time.sleep(60)")
    host = LiveHost(env={"PATH": str(tmp_path)})
    t0 = time.monotonic()
    cap = host.run("nvidia-smi.txt", ["nvidia-smi"], timeout=20, max_bytes=2 * MiB)
    took = time.monotonic() - t0
    assert took < 10, f"took {took:.1f} s: the tool ran on after its output passed the cap"
    assert cap.status == "ok" and cap.data is not None and len(cap.data) == 2 * MiB
    assert "stopped" in (cap.error or "")
    assert tool.exists()


@posix_only
def test_memory_follows_the_cap_not_the_output(tmp_path: Path) -> None:
    _tool(tmp_path, "rocminfo", "for _ in range(1024):\n    out.write(b'agent ' * 10922 + b'\\n')")  # ~64 MiB
    host = LiveHost(env={"PATH": str(tmp_path)})
    tracemalloc.start()
    try:
        cap = host.run("rocminfo.txt", ["rocminfo"], timeout=30, max_bytes=4 * MiB)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cap.data is not None and len(cap.data) == 4 * MiB
    assert peak < 16 * MiB, f"peak {peak / MiB:.0f} MiB for a 4 MiB cap"


@posix_only
def test_a_tool_within_the_cap_is_read_whole_with_its_stderr(tmp_path: Path) -> None:
    _tool(tmp_path, "clinfo", "out.write(b'a' * 100000); sys.stderr.write('warn ' * 100000); sys.exit(3)")
    host = LiveHost(env={"PATH": str(tmp_path)})
    cap = host.run("clinfo.txt", ["clinfo"], timeout=20)
    assert cap.status == "error" and cap.data == b"a" * 100000
    assert "exited with status 3" in (cap.error or "") and "warn" in (cap.error or "")


@posix_only
def test_a_grandchild_holding_the_pipe_still_ends_at_the_timeout(tmp_path: Path) -> None:
    tool = tmp_path / "lspci"
    tool.write_text("#!/bin/sh\necho one\nsleep 30 &\nexit 0\n", encoding="utf-8")
    tool.chmod(0o755)
    host = LiveHost(env={"PATH": str(tmp_path) + os.pathsep + os.environ.get("PATH", "")})
    t0 = time.monotonic()
    cap = host.run("lspci.txt", ["lspci"], timeout=2)
    assert time.monotonic() - t0 < 8
    assert cap.status in ("timeout", "ok")


@pytest.mark.slow
@posix_only
@pytest.mark.parametrize("spew", [
    "while True:\n    out.write(b'x' * 65536)",  # one endless line
    "while True:\n    out.write(b'noise line\\n' * 6000)",  # endless lines that are not events
    "while True:\n    sys.stderr.buffer.write(b'e' * 65536)",  # an endless stderr
])
def test_a_spewing_python_target_gives_a_clear_error(tmp_path: Path, spew: str) -> None:
    py = _tool(tmp_path, "python", spew)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "mlprobe", "verify", "--python", str(py), "--timeout", "60"],
                       capture_output=True, text=True, timeout=120, env=env)
    took = time.monotonic() - t0
    assert "Traceback" not in p.stderr and "MemoryError" not in p.stderr, p.stderr[-2000:]
    assert p.returncode in (2, 3), p.stderr[-2000:]
    assert "error [E" in p.stderr and "stopped" in p.stderr, p.stderr[-2000:]
    assert took < 50, f"{took:.0f} s: the child was not stopped at the cap"
