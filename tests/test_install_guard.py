"""What a hostile user does to `mlprobe install --apply`: two runs into the same venv at once,
`kill -9` of mlprobe's whole process group, a closed terminal (SIGHUP), a venv under /etc. Real
pip, real venvs, a real index on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List

import psutil
import pytest

from mlprobe.errors import StageError, exit_status
from mlprobe.install.guard import check_location, journal_path, system_location
from tests.pep503_server import IndexConfig, LocalIndex
from tests.test_install_transaction import (  # noqa: F401  (wheels and work are fixtures)
    assert_unchanged,
    cli,
    cli_env,
    existing_env,
    recipe,
    wheels,
    work,
)

pytestmark = pytest.mark.slow

SLOW = "big_lib-1.0-py3-none-any.whl"


@pytest.fixture()
def slow_index(wheels: Path) -> Iterator[LocalIndex]:  # noqa: F811
    # The dry run's download is quick, the install's is slow: whatever happens lands mid-install.
    cfg = IndexConfig(slow_files={SLOW}, slow_chunk=16 * 1024, slow_tick_s=0.05, slow_from_nth=2)
    with LocalIndex(wheels, cfg, max_requests=800, lifetime_s=240) as idx:
        yield idx


def _start(work: Path, idx: LocalIndex, venv: Path, *extra: str) -> "subprocess.Popen[str]":  # noqa: F811
    return subprocess.Popen(
        [sys.executable, "-m", "mlprobe", "install", "--recipe-file", str(recipe(work, ["big-app"])),
         "--index-url", idx.url, "--apply", "--no-verify", "--venv", str(venv), *extra],
        cwd=work / "cwd", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(work),
        start_new_session=True)


def _pips_for(venv: Path) -> List[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if "pip" in cmd and str(venv) in cmd and "install" in cmd:
            out.append(p)
    return out


def _wait_slow(idx: LocalIndex, proc: "subprocess.Popen[str]") -> None:
    if not idx.slow_started.wait(120):
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the slow download never started: {err[-2000:]}")
    time.sleep(0.3)


def test_a_second_install_into_the_same_venv_is_refused_while_the_first_runs(
        work: Path, slow_index: LocalIndex) -> None:  # noqa: F811
    venv = work / "cwd" / "env"
    first = _start(work, slow_index, venv, "--without-pip")
    try:
        _wait_slow(slow_index, first)
        second = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--index-url", slow_index.url,
                     "--apply", "--no-verify", "--venv", str(venv))
        assert second.returncode == 1, second.stderr
        assert "[E520]" in second.stderr and "another mlprobe install is working on" in second.stderr
        assert "pid" in second.stderr
        slow_index.config.slow_files.clear()  # let the first one finish quickly
        out, err = first.communicate(timeout=240)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, err[-3000:]
    assert (venv / "pyvenv.cfg").is_file(), "the first install's venv was removed by the second"


def test_kill_9_of_the_process_group_leaves_no_pip_and_the_next_run_rolls_back(
        work: Path, wheels: Path, slow_index: LocalIndex) -> None:  # noqa: F811
    with LocalIndex(wheels, IndexConfig(), max_requests=200, lifetime_s=60) as idx:
        venv, py, freeze, tree = existing_env(work, idx, "goodlib==1.0")
    proc = _start(work, slow_index, venv)
    try:
        _wait_slow(slow_index, proc)
        assert _pips_for(venv), "no pip child found"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    deadline = time.monotonic() + 10
    while _pips_for(venv) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _pips_for(venv), "pip outlived mlprobe and keeps changing the venv"
    env = cli_env(work)
    jpath = Path(env["XDG_CACHE_HOME"]) / "mlprobe" / "transactions"
    assert list(jpath.glob("*.journal.json")), "no journal of the interrupted install"
    rec = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--recover", "--json"],
                         cwd=work / "cwd", capture_output=True, text=True, timeout=300, env=env)
    assert rec.returncode == 0, rec.stderr
    assert any(str(venv) in x for x in json.loads(rec.stdout)["recovered"])
    assert_unchanged(venv, py, freeze, tree)
    assert not list(jpath.glob("*.journal.json"))


def test_a_half_made_venv_from_a_killed_run_is_removed_by_the_next_run(
        work: Path, slow_index: LocalIndex) -> None:  # noqa: F811
    venv = work / "cwd" / "new-env"
    proc = _start(work, slow_index, venv, "--without-pip")
    try:
        _wait_slow(slow_index, proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (venv / "pyvenv.cfg").is_file(), "the killed run had made the venv"
    slow_index.config.slow_files.clear()
    again = cli(work, "--recipe-file", str(recipe(work, ["big-app"])), "--index-url", slow_index.url,
                "--apply", "--no-verify", "--without-pip", "--venv", str(venv))
    assert again.returncode == 0, again.stderr
    assert "rolled back an interrupted install" in again.stderr
    freeze = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "list",
                             "--format=freeze"], capture_output=True, text=True, timeout=120).stdout
    assert "big-app==" in freeze.lower().replace("_", "-")


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_closed_terminal_rolls_back_like_ctrl_c(work: Path, wheels: Path, slow_index: LocalIndex,  # noqa: F811
                                                  sig: int) -> None:
    with LocalIndex(wheels, IndexConfig(), max_requests=200, lifetime_s=60) as idx:
        venv, py, freeze, tree = existing_env(work, idx, "goodlib==1.0")
    proc = _start(work, slow_index, venv)
    try:
        _wait_slow(slow_index, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-2000:]
    assert f"stopped by {signal.Signals(sig).name}" in err and "Ctrl-C" not in err
    assert_unchanged(venv, py, freeze, tree)
    assert not _pips_for(venv)


def test_a_venv_in_a_system_location_is_refused(work: Path) -> None:  # noqa: F811
    target = Path("/etc/mlprobe-test-newvenv")
    cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--index-url", "http://127.0.0.1:9/simple/",
             "--apply", "--venv", str(target))
    assert cp.returncode == 2 and "[E519]" in cp.stderr and "--force" in cp.stderr, cp.stderr
    assert not target.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to write under /etc")
def test_force_installs_into_a_system_location(work: Path, wheels: Path) -> None:  # noqa: F811
    """The same /etc venv with --force: made, installed into, and the guard said it was forced."""
    import shutil

    target = Path(f"/etc/mlprobe-test-forced-{os.getpid()}")
    assert not target.exists()
    try:
        with LocalIndex(wheels, IndexConfig(), max_requests=400, lifetime_s=120) as idx:
            cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--index-url", idx.url,
                     "--apply", "--no-verify", "--without-pip", "--force", "--venv", str(target))
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert "[E519]" not in cp.stderr
        assert (target / "pyvenv.cfg").is_file()
        freeze = subprocess.run([sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "list",
                                 "--format=freeze"], capture_output=True, text=True, timeout=120).stdout
        assert "demo-app==1.0" in freeze.lower().replace("_", "-")
    finally:
        shutil.rmtree(target, ignore_errors=True)


@pytest.mark.parametrize("path,refused", [
    ("/etc/venv", True), ("/usr/lib/venv", True), ("/usr", True), ("/", True), ("/var/lib/x", True),
    ("/usr/local/venvs/x", False), ("/var/tmp/x", False), ("/home/someone/venvs/x", False),
    ("/opt/venv", False), ("/tmp/x", False),
])
def test_system_locations(path: str, refused: bool) -> None:
    assert (system_location(Path(path)) is not None) is refused
    if refused:
        with pytest.raises(StageError) as e:
            check_location(Path(path), force=False)
        assert exit_status(e.value.kind) == 2
        check_location(Path(path), force=True)


def test_journal_key_follows_the_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert journal_path(str(link)) == journal_path(str(real)) == journal_path(str(tmp_path / "x" / ".." / "real"))
