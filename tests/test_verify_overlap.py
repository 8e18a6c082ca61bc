"""Children of one verify run side by side, their timed loops one at a time (verify/overlap.py):
a timed section starts only while every other child waits at the gate, never overlaps another, a
child starts only while nobody times, and a waiting child is not taken for a hung one."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path
from typing import List, Tuple

import pytest

from mlprobe.verify.child import run_child
from mlprobe.verify.overlap import TimingGate, run_lanes

FAKE = r'''
import json, sys, time
MARK = "@@mlprobe-verify@@ "
def emit(**ev):
    sys.stdout.write(MARK + json.dumps(ev) + "\n"); sys.stdout.flush()
def work(secs):                                # untimed work that reports progress
    end = time.time() + secs
    while time.time() < end:
        time.sleep(0.05)
        emit(event="tick", at=time.time())
cfg = json.loads(sys.argv[3])
emit(event="stage", device="cpu", stage="learning")
work(cfg["before"])                            # import, correctness, learning
emit(event="result", device="cpu", stage="learning", data={"seconds": cfg["before"]})
emit(event="timing", on=True)
sys.stdin.readline()                           # wait for "go"
t0 = time.time()
time.sleep(cfg["timed"])                       # the timed loops
emit(event="interval", start=t0, end=time.time())
emit(event="timing", on=False)
work(cfg["after"])
emit(event="done")
'''


@pytest.fixture()
def fake_python(tmp_path: Path) -> str:
    """An 'interpreter' that ignores the payload path and acts out the gated protocol."""
    script = tmp_path / "fake_python"
    script.write_text(f"#!{sys.executable}\n" + FAKE)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.mark.skipif(os.name != "posix", reason="the fake interpreter is a script with a #! line")
@pytest.mark.parametrize("pause", [False, pytest.param(True, marks=pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="pausing the others is Linux-only"))])
def test_timed_sections_never_overlap_and_waiting_is_not_a_hang(fake_python: str, pause: bool) -> None:
    """Barrier: the first timed section waits for every other child to reach the gate. Pausing
    (Linux): it starts at once and the others are stopped meanwhile (none of them reports progress
    inside another's timed section), and a paused child is not taken for a hung one either."""
    gate = TimingGate(pause=pause)
    plans = [{"before": 0.1, "timed": 0.45, "after": 0.3}, {"before": 0.2, "timed": 0.45, "after": 0.0},
             {"before": 1.0, "timed": 0.4, "after": 0.1}]
    results: List[Tuple[float, float]] = []
    ticks: List[Tuple[int, float]] = []
    paused: dict = {}
    lock = threading.Lock()

    def one(i: int, cfg: dict) -> None:
        # stall 0.5 s: shorter than the wait for the others' untimed work and timed sections, so a
        # waiting (or paused) child that kept its stall clock running would be killed as hung
        res = run_child(fake_python, ["run", json.dumps(cfg)], timeout=20, stall=0.5, gate=gate)
        assert res.clean, (res.ended, res.detail, res.stderr_tail)
        iv = next(e for e in res.events if e["event"] == "interval")
        learned = next(e for e in res.events if e["event"] == "result")
        with lock:
            paused[i] = learned["data"].get("paused_s")
            results.append((iv["start"], iv["end"]))
            ticks.extend((i, e["at"]) for e in res.events if e["event"] == "tick")

    started = time.time()
    threads = [threading.Thread(target=one, args=(i, p)) for i, p in enumerate(plans)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 3
    results.sort()
    for (_, end), (start, _) in zip(results, results[1:]):
        assert start >= end - 0.01, results
    if not pause:
        # the first timed section waited for the slowest untimed start (1.0 s): a barrier, not a queue
        assert results[0][0] - started >= 0.9
        assert paused == {0: None, 1: None, 2: None}  # nobody is paused at a barrier
    else:
        # it went as soon as it asked (0.1 s of work), and nobody worked while anybody timed
        assert results[0][0] - started < 0.9, results
        inside = [(i, at) for i, at in ticks for start, end in results if start + 0.02 < at < end - 0.02]
        assert inside == [], (inside, results)
        # the slow starter was paused through both other timed sections (0.45 s each): its stage
        # record says so, for the seconds its own clock counted
        assert paused[2] is not None and paused[2] >= 0.6, paused
    assert time.time() - started < 6


def test_a_child_starts_only_while_nobody_times() -> None:
    gate = TimingGate()
    a, b = object(), object()
    gate.join(a)
    gate.acquire(a)  # alone: it goes at once
    joined = threading.Event()

    def late() -> None:
        gate.join(b)
        joined.set()

    t = threading.Thread(target=late)
    t.start()
    assert not joined.wait(0.3)
    gate.release(a)
    assert joined.wait(2)
    t.join()
    gate.leave(a)
    gate.leave(b)


def test_a_child_that_ends_frees_the_gate_for_the_one_waiting() -> None:
    """b waits for a (a runs untimed work); a ends without ever asking (a crash, a kill): b goes.
    Then b holds; b ending while it holds lets a new child start."""
    gate = TimingGate()
    a, b, c = object(), object(), object()
    gate.join(a)
    gate.join(b)
    got = threading.Event()

    def wait_b() -> None:
        gate.acquire(b)
        got.set()

    t = threading.Thread(target=wait_b)
    t.start()
    assert not got.wait(0.3)  # a is still working: b must not time beside it
    gate.leave(a)
    assert got.wait(2)
    t.join()
    started = threading.Event()
    t2 = threading.Thread(target=lambda: (gate.join(c), started.set()))
    t2.start()
    assert not started.wait(0.2)  # b times: nobody new starts
    gate.leave(b)  # b crashed while timing
    assert started.wait(2)
    t2.join()
    gate.leave(c)


def test_lanes_keep_their_order_and_run_side_by_side() -> None:
    seen: List[str] = []

    def job(name: str, secs: float):  # type: ignore[no-untyped-def]
        def run() -> str:
            time.sleep(secs)
            seen.append(name)
            return name
        return run

    started = time.monotonic()
    out = run_lanes({"a": [job("a1", 0.3), job("a2", 0.1)], "b": [job("b1", 0.2)]})
    assert [f.result() for f in out["a"]] == ["a1", "a2"] and out["b"][0].result() == "b1"
    assert time.monotonic() - started < 0.55
    assert seen.index("a1") < seen.index("a2")
    serial = run_lanes({"a": [job("x", 0.0)], "b": [job("y", 0.0)]}, parallel=False)
    assert serial["a"][0].result() == "x" and serial["b"][0].result() == "y"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_paused_child_does_not_outlive_a_killed_runner(tmp_path: Path) -> None:
    """A gated child asks the kernel to kill it when the runner dies: paused (SIGSTOP) while another
    child times, it could not notice a `kill -9` of mlprobe, and would keep its GPU memory forever."""
    import signal
    import subprocess

    pid_file = tmp_path / "child.pid"
    child = ("import os, signal, sys\n"
             "from mlprobe.verify.payload.__main__ import die_with_parent\n"
             "die_with_parent(os.getppid())\n"
             f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
             "os.kill(os.getpid(), signal.SIGSTOP)\n")
    runner = ("import subprocess, sys, time\n"
              f"subprocess.Popen([sys.executable, '-c', {child!r}])\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", runner])
    deadline = time.time() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return  # gone (and reaped)
        if state in ("Z", "X"):
            return  # dead, waiting for init to reap it
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"the paused child {pid} outlived its killed runner (state {state})")
