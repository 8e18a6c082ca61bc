"""A probe whose tool hangs, crashes, is missing, unreadable, or prints garbage costs only that
probe: the scan finishes, records the status and error, and `mlprobe scan` exits 0."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlprobe.scan.host import LiveHost
from mlprobe.scan.run import scan

pytestmark = pytest.mark.skipif(os.name != "posix", reason="fake tools are POSIX shell scripts")


def _tool(folder: Path, name: str, body: str) -> None:
    p = folder / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture()
def fake_path(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # hangs (and leaves a grandchild holding the pipe: the timeout must still end it)
    _tool(bin_dir, "nvidia-smi", "sleep 60")
    # crashes with a signal
    _tool(bin_dir, "rocminfo", "kill -SEGV $$")
    # exits non-zero with a message
    _tool(bin_dir, "rocm-smi", "echo 'ERROR: GPU[0] : unable to read' >&2; exit 2")
    # binary garbage
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(os.urandom(4096) + b"\x00\xff\xfe" * 100)
    _tool(bin_dir, "lspci", f"cat '{garbage}'")
    _tool(bin_dir, "lscpu", f"cat '{garbage}'")
    _tool(bin_dir, "lsusb", f"cat '{garbage}'")
    _tool(bin_dir, "clinfo", f"cat '{garbage}'")
    return bin_dir


def test_hostile_tools_cost_only_their_probes(fake_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{fake_path}{os.pathsep}{env.get('PATH', '')}"
    host = LiveHost(timeout_scale=0.1, env=env)  # nvidia-smi's 10 s limit becomes 1 s
    started = time.perf_counter()
    facts = scan(host)
    elapsed = time.perf_counter() - started
    assert elapsed < 8, f"scan took {elapsed:.1f} s: a hanging tool was not cut off"
    status = {p.name: p for p in facts.probes}
    caps = {n: host.get(n) for n in ("nvidia-smi-q-x.xml", "rocminfo.txt", "rocm-smi.txt", "lspci.txt")}
    assert caps["nvidia-smi-q-x.xml"].status == "timeout"
    assert caps["rocminfo.txt"].status == "error" and "-11" in (caps["rocminfo.txt"].error or "")
    assert caps["rocm-smi.txt"].status == "error" and "unable to read" in (caps["rocm-smi.txt"].error or "")
    # The probes that read them say so; nothing invented a GPU from garbage.
    for name in ("nvidia", "rocm", "pci"):
        if name in status:
            assert status[name].status in ("timeout", "error"), status[name]
            assert status[name].error
    assert facts.gpus == ()
    # The CPU still comes from /proc/cpuinfo.
    assert facts.cpu.threads and facts.cpu.threads >= 1


@pytest.mark.slow
def test_cli_exits_zero_with_hostile_tools(fake_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{fake_path}{os.pathsep}{env.get('PATH', '')}"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mlprobe", "scan", "--json"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert time.perf_counter() - started < 40
    doc = json.loads(proc.stdout)
    by_name = {p["name"]: p for p in doc["probes"]}
    assert by_name["nvidia"]["status"] in ("timeout", "error") if "nvidia" in by_name else True
    assert doc["gpus"] == []


def test_missing_tool_costs_no_subprocess(tmp_path: Path) -> None:
    host = LiveHost(env={"PATH": str(tmp_path)})
    cap = host.get("nvidia-smi-q-x.xml")
    assert cap.status == "absent" and "not found" in (cap.error or "")
    assert cap.seconds < 0.05


def test_unreadable_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    host = LiveHost()
    d = tmp_path / "adir"
    d.mkdir()
    cap = host.read_file("proc-cpuinfo.txt", str(d))
    assert cap.status == "error" and cap.error
    cap = host.read_file("proc-cpuinfo.txt", str(tmp_path / "missing"))
    assert cap.status == "absent"


def test_absent_tools_cost_no_subprocess_in_a_whole_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine without vendor tools, the only child process is the OpenCL enumeration."""
    spawned = []
    real_popen = subprocess.Popen

    class Recording(real_popen):  # type: ignore[misc,valid-type]
        def __init__(self, args, *a, **k):  # type: ignore[no-untyped-def]
            spawned.append(list(args))
            super().__init__(args, *a, **k)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    host = LiveHost(env={"PATH": str(tmp_path)})  # an empty PATH: no tool exists
    facts = scan(host)
    assert facts.cpu.threads
    others = [a for a in spawned if not str(a[-1]).endswith("opencl_child.py")]
    assert others == [], others
    absent = {p.name for p in facts.probes if p.status == "absent"}
    assert {"nvidia", "rocm"} <= absent or not ({"nvidia", "rocm"} & {p.name for p in facts.probes})


def test_opencl_fast_child_crash_falls_back_to_full_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan loads only pyopencl's binding; if that child dies of a signal, it asks once more
    through `import pyopencl`."""
    from mlprobe.scan.live import _early
    from mlprobe.scan.capture import spec
    from mlprobe.scan.live import opencl

    real_spawn = _early.spawn
    calls = []

    def spawn(full_import: bool = False) -> subprocess.Popen:
        calls.append(full_import)
        if not full_import:
            return subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return real_spawn(full_import=True)

    monkeypatch.setattr(_early, "spawn", spawn)
    monkeypatch.setattr(_early, "started", None)
    cap = opencl.live_capture(LiveHost(), spec("mlprobe-opencl.json"))
    assert calls == [False, True]
    assert cap.status in ("ok", "absent"), cap.error  # absent where pyopencl is not installed


def test_a_replay_parser_that_never_ends_costs_only_its_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay parses on two worker threads: one probe stuck past the deadline is a timeout, and
    every other probe of the bundle still gives its facts."""
    import threading

    from mlprobe import probes as registry
    from mlprobe.scan import run as scan_run
    from mlprobe.scan.host import ReplayHost

    from .conftest import FIXTURES

    release = threading.Event()
    real_load = registry.load

    def load(module: str):  # type: ignore[no-untyped-def]
        if module == "stuck":
            def probe(host):  # type: ignore[no-untyped-def]
                release.wait(20)
                raise RuntimeError("released")
            return probe
        return real_load(module)

    monkeypatch.setattr(registry, "load", load)
    monkeypatch.setattr(registry, "builtin", lambda: [("stuck", "stuck")] + list(registry.PROBES))
    monkeypatch.setattr(scan_run, "PROBE_DEADLINE_S", 3.0)
    host = ReplayHost(FIXTURES / "linux-nvidia-h200-mlprobe-capture")
    t0 = time.monotonic()
    try:
        facts = scan_run.scan(host)
    finally:
        release.set()
    assert time.monotonic() - t0 < 10
    status = {p.name: p.status for p in facts.probes}
    assert status["stuck"] == "timeout"
    assert status["nvidia"] == "ok" and status["cpu"] == "ok"
    assert [g.name for g in facts.gpus] == ["NVIDIA H200"]


def _child(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    from mlprobe.scan.live import _early

    def spawn(full_import: bool = False) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=os.name == "posix")

    monkeypatch.setattr(_early, "spawn", spawn)
    monkeypatch.setattr(_early, "started", None)
    from mlprobe.scan.live import opencl

    opencl._end_children()  # what earlier scans of this process left ending
    monkeypatch.setattr(opencl, "_ending", [])


_ANSWER_THEN = ("import json, os, sys, time\n"
                "sys.stdout.write(json.dumps({'platforms': []})); sys.stdout.flush()\n"
                "n = os.open(os.devnull, os.O_WRONLY); os.dup2(n, 1); os.dup2(n, 2)\n")


def test_opencl_child_that_answered_is_not_waited_for_while_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenCL child writes its answer, closes its output and then ends (NVIDIA's driver tears its
    context down at exit): the scan takes the answer at once, and a child still ending (here: hanging)
    when mlprobe exits is ended then."""
    from mlprobe.scan.capture import spec
    from mlprobe.scan.live import opencl

    _child(monkeypatch, _ANSWER_THEN + "time.sleep(30)\n")
    t0 = time.monotonic()
    cap = opencl.live_capture(LiveHost(), spec("mlprobe-opencl.json"))
    assert time.monotonic() - t0 < 5
    assert cap.status == "ok" and json.loads(cap.data or b"") == {"platforms": []}
    [proc] = opencl._ending
    assert proc.poll() is None  # still "ending"
    opencl._end_children()
    assert proc.wait(timeout=5) != 0 and opencl._ending == []


def test_opencl_child_that_closed_its_output_without_an_answer_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.scan.capture import spec
    from mlprobe.scan.live import opencl

    _child(monkeypatch, "import os, sys, time\nsys.stdout.write('{\"platf'); sys.stdout.flush()\n"
                        "n = os.open(os.devnull, os.O_WRONLY); os.dup2(n, 1); os.dup2(n, 2)\n"
                        "time.sleep(0.5); sys.exit(3)\n")
    cap = opencl.live_capture(LiveHost(), spec("mlprobe-opencl.json"))
    assert cap.status == "error" and "status 3" in (cap.error or ""), cap.error
    assert opencl._ending == []
