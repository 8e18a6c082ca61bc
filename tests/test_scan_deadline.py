"""Every tool hangs (fake nvidia-smi, rocminfo, sycl-ls, amd-smi, clinfo … first on PATH): scan and plan
write their output at the probe deadline and exit right after it, without waiting for the hung
probes' threads or their next tools; no tool's process (nor a child it forked) outlives mlprobe. A tool
that forks a child holding its stdout and exits: the child is ended with the group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlprobe.scan.live import proc as live_proc
from tests.hung_tools import MARK, make_hung_tools, run_with_deadline, survivors

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 3.0


@pytest.mark.parametrize("command", [["scan", "--json"], ["plan", "--json"]])
def test_with_every_tool_hung_the_command_exits_at_its_deadline_and_leaves_no_tool_running(
        tmp_path: Path, command: "list[str]") -> None:
    folder = tmp_path / "bin"
    make_hung_tools(folder)
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    out_at, exit_at, rc, out = run_with_deadline(command, folder, DEADLINE_S, env)
    assert rc == 0
    doc = json.loads(out)
    assert doc  # the output is complete JSON
    # the hung tools' own limits are 5-20 s each, run one after another by a probe: waiting for any of
    # them would put the exit well past the deadline
    assert exit_at < DEADLINE_S + 4.0, f"exited {exit_at:.1f} s after the start (deadline {DEADLINE_S} s)"
    assert exit_at - out_at < 1.0
    time.sleep(0.3)
    assert survivors(folder) == []


def test_a_tool_that_exits_leaving_a_child_on_its_stdout_leaves_no_survivor(tmp_path: Path) -> None:
    tool = tmp_path / "forker"
    tool.write_text(f"#!/bin/sh\necho answer\n/bin/sh -c 'sleep 600; : {MARK} {tmp_path}' &\nexit 0\n")
    tool.chmod(0o755)
    t0 = time.monotonic()
    rc, out, _ = live_proc.run_argv([str(tool)], timeout=30)
    took = time.monotonic() - t0
    assert rc == 0 and out.strip() == b"answer"
    assert took < 10, "the child holding stdout was waited for until the timeout"
    time.sleep(0.2)
    assert survivors(tmp_path) == []


def test_an_early_tool_whose_leader_exited_has_its_group_ended_at_exit(tmp_path: Path) -> None:
    """The early NVIDIA queries (started before the probes): a run no probe takes, whose script exited
    and left a child, is ended with its group when mlprobe exits."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\n/bin/sh -c 'sleep 600; : {MARK} {tmp_path}' &\nexit 0\n")
    tool.chmod(0o755)
    code = ("import time; from mlprobe.scan.live import _early; _early.start_tools(); "
            "print(len(_early._commands)); time.sleep(0.5)")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=str(tmp_path) + os.pathsep + "/usr/bin:/bin")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                        cwd=str(tmp_path))
    assert cp.returncode == 0 and int(cp.stdout.strip()) >= 1, cp.stderr
    time.sleep(0.3)
    assert survivors(tmp_path) == []


def test_an_abandoned_thread_starts_no_tool(tmp_path: Path) -> None:
    import threading

    errors: "list[BaseException]" = []
    gate = threading.Event()

    def late_probe() -> None:
        gate.wait(10)
        try:
            live_proc.run_argv(["/bin/true"], timeout=5)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=late_probe, daemon=True)
    t.start()
    live_proc.abandon([t])
    gate.set()
    t.join(10)
    assert errors and isinstance(errors[0], live_proc.NotStarted) and "deadline" in str(errors[0])


def _forker(folder: Path) -> Path:
    tool = folder / "forker"
    tool.write_text(f"#!/bin/sh\necho answer\n/bin/sh -c 'sleep 600; : {MARK} {folder}' &\nexit 0\n")
    tool.chmod(0o755)
    return tool


def test_install_steps_and_queries_end_the_group_of_a_tool_that_left_a_child(tmp_path: Path) -> None:
    from mlprobe.install.proc import Transcript, run_logged, run_quiet

    tool = _forker(tmp_path)
    r = run_logged([str(tool)], transcript=Transcript(None), timeout=60)
    assert r.rc == 0 and "answer" in "".join(r.tail)
    time.sleep(0.2)
    assert survivors(tmp_path) == []
    cp = run_quiet([str(tool)], timeout=5)
    assert cp.returncode == 0 and cp.stdout.strip() == "answer"
    time.sleep(0.2)
    assert survivors(tmp_path) == []


def test_run_quiet_hands_its_input_over_once_however_long_the_child_takes(tmp_path: Path) -> None:
    """The child reads its standard input only after a while (uv's dry run, given the requirements on
    stdin): the input goes over once, and the answer comes back."""
    from mlprobe.install.proc import run_quiet

    cp = run_quiet([sys.executable, "-c", "import sys, time; time.sleep(0.3); print(sys.stdin.read().upper())"],
                   timeout=30, stdin="demo-app\n")
    assert cp.returncode == 0 and cp.stdout.strip() == "DEMO-APP", cp.stderr


def test_a_host_whose_scan_passed_its_deadline_starts_no_tool_again(tmp_path: Path) -> None:
    """doctor and report ask for captures after the scan: once the scan gave up on its tools, they get
    the reason, not a fresh run of a hung tool with its own time limit."""
    from mlprobe.scan.host import LiveHost

    folder = tmp_path / "bin"
    make_hung_tools(folder)
    host = LiveHost(env={"PATH": str(folder)})
    host.close_tools("the scan stopped waiting for its tools after 30 s")
    t0 = time.monotonic()
    cap = host.get("nvidia-smi.txt")
    assert cap.status == "timeout" and "not started" in (cap.error or "") and "30 s" in (cap.error or "")
    assert time.monotonic() - t0 < 1.0
    assert survivors(folder) == []
