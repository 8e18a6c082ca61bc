"""Progress on long steps: on a terminal, stderr shows what runs and for how long (a scan waiting on a
slow tool, a report, a pip install whose seconds keep counting while pip is quiet); piped or
redirected there is no animation (install logs one plain line per step), and --quiet turns it off. Real processes with stderr on a pseudo-terminal."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from .conftest import ROOT
from .ptyio import drain

# slow: every test runs mlprobe as a real process on a pseudo-terminal and waits for it
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix" or sys.platform == "darwin",
                                 reason="pseudo-terminals and fake tools as shell scripts (Linux)")]


def run(argv: List[str], env: Dict[str, str], tty: bool, timeout: float = 90) -> Tuple[int, bytes, bytes]:
    """Run argv with stdout piped and stderr on a pseudo-terminal (tty) or a pipe."""
    if not tty:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=timeout,
                           cwd=ROOT)
        return p.returncode, p.stdout, p.stderr
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env,
                            cwd=ROOT)
    os.close(slave)
    try:
        err = drain(master, proc, timeout)
        assert proc.stdout is not None
        out = proc.stdout.read()
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return rc, out, err


@pytest.fixture()
def slow_tool_env(tmp_path: Path) -> Dict[str, str]:
    """PATH with an nvidia-smi that takes 1.5 s to say nothing (under its 10 s limit)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\nsleep 1.5\nexit 9\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", TERM="xterm",
               PYTHONPATH=str(ROOT))
    env.pop("NO_COLOR", None)
    return env


MLPROBE = [sys.executable, "-m", "mlprobe"]


def test_scan_on_a_terminal_names_the_tool_it_waits_for(slow_tool_env: Dict[str, str]) -> None:
    rc, out, err = run([*MLPROBE, "scan", "--json"], slow_tool_env, tty=True)
    assert rc == 0, err
    text = err.decode("utf-8", "replace")
    assert "scanning (" in text and "waiting for nvidia-smi" in text, text[-2000:]
    assert text.rstrip().endswith("\x1b[2K") or "\r\x1b[2K" in text  # the line is cleared at the end
    assert out.lstrip().startswith(b"{")  # stdout is the answer only


@pytest.mark.parametrize("argv", [["scan"], ["report", "-o", "{tmp}/r.json"]])
def test_no_progress_when_stderr_is_piped(slow_tool_env: Dict[str, str], tmp_path: Path, argv: List[str]) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    rc, out, err = run([*MLPROBE, *argv], slow_tool_env, tty=False)
    assert rc == 0, err
    assert b"scanning" not in err and b"\r" not in err and b"\x1b" not in err, err


@pytest.mark.parametrize("flag", ["-q", "--quiet"])
def test_quiet_turns_progress_off_on_a_terminal(slow_tool_env: Dict[str, str], flag: str) -> None:
    rc, out, err = run([*MLPROBE, flag, "scan", "--json"], slow_tool_env, tty=True)
    assert rc == 0
    assert b"scanning" not in err and b"waiting" not in err, err


def test_report_on_a_terminal_shows_progress(slow_tool_env: Dict[str, str], tmp_path: Path) -> None:
    rc, out, err = run([*MLPROBE, "report", "-o", str(tmp_path / "r.json")], slow_tool_env, tty=True)
    assert rc == 0, err
    assert b"report: scanning, planning (" in err, err[-2000:]
    assert (tmp_path / "r.json").is_file()


APPLY = """
import sys, time
from mlprobe import ui
ui.set_level({level})
from mlprobe.render.install_terminal import ApplyProgress
p = ApplyProgress()
p.step("installing with pip: demo-app")
time.sleep(1.6)  # pip says nothing (a large download): the seconds must still count
p.line("Collecting demo-app")
time.sleep(0.4)
p.done("installed with pip in 3 s")
p.close()
"""


@pytest.mark.parametrize("tty,level,shown", [
    (True, 1, ["installing with pip: demo-app (1 s)", "(2 s) Collecting demo-app", "done installed with pip"]),
    (True, 0, []),
    (False, 2, ["... installing with pip: demo-app", "done installed with pip"]),
    (False, 1, []),  # a stderr that is a file or a pipe gets no progress (only with --verbose)
    (False, 0, []),
])
def test_install_progress_counts_while_pip_is_quiet(tty: bool, level: int, shown: List[str]) -> None:
    env = dict(os.environ, TERM="xterm", PYTHONPATH=str(ROOT))
    if not tty:
        env["FORCE_COLOR"] = "1"  # rich then calls a pipe a terminal; still no animation in a pipe
    rc, _, err = run([sys.executable, "-c", APPLY.format(level=level)], env, tty=tty)
    assert rc == 0, err
    text = err.decode("utf-8", "replace")
    plain = _strip_ansi(text)
    for s in shown:
        assert s in plain, plain
    if not shown:
        assert plain.strip() == "", plain
    if not tty:  # colour is FORCE_COLOR's to ask for; animation (carriage returns, erasing) never
        assert "\r" not in text and "\x1b[2K" not in text and "\x1b[?25l" not in text, text


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "\n")


@pytest.mark.slow
def test_a_real_install_shows_its_steps_on_a_terminal(tmp_path: Path) -> None:
    from tests.pep503_server import IndexConfig, LocalIndex, sample_wheels

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    sample_wheels(wheels)
    import json

    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"recipe": "demo", "framework": "demo", "packages": ["demo-app"]}))
    env = dict(os.environ, TERM="xterm", PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    with LocalIndex(wheels, IndexConfig(), max_requests=500, lifetime_s=200) as idx:
        argv = [*MLPROBE, "install", "--recipe-file", str(recipe), "--index-url", idx.url, "--apply",
                "--no-verify", "--without-pip", "--venv", str(tmp_path / "env")]
        rc, out, err = run(argv, env, tty=True, timeout=240)
        assert rc == 0, err[-3000:]
        plain = _strip_ansi(err.decode("utf-8", "replace"))
        assert "installing with pip" in plain and " s)" in plain, plain[-3000:]
        rc, out, err_piped = run([*argv[:-1], str(tmp_path / "env2")], env, tty=False, timeout=240)
        assert rc == 0, err_piped[-3000:]
        assert err_piped == b"", err_piped  # a stderr that is not a terminal gets no progress
        rc, out, err_piped = run([*MLPROBE, "-v", *argv[3:-1], str(tmp_path / "env3")],
                                 env, tty=False, timeout=240)
        assert rc == 0, err_piped[-3000:]
        assert b"\x1b" not in err_piped and b"\r" not in err_piped, err_piped
        assert b"done " in err_piped  # with --verbose, one line per step

