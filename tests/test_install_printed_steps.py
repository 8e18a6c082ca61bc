"""The steps `mlprobe install` prints are what it does: a file it will not write is said not to be
written (and is not), the recipe's own commands are shown once as what to type by hand (not as
steps), a dry-run table under --apply does not say "nothing was installed", and a progress line
names what it installs (also from a lock, where no requirement is named)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest

from tests.pep503_server import IndexConfig, LocalIndex, sample_wheels
from tests.test_install_transaction import cli_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalIndex]:
    folder = tmp_path_factory.mktemp("wheels")
    sample_wheels(folder)
    with LocalIndex(folder, IndexConfig(), max_requests=3000, lifetime_s=400) as idx:
        yield idx


def _recipe(work: Path) -> Path:
    rec = {"recipe": "demo", "title": "a demo recipe", "framework": "demo", "packages": ["demo-app"],
           "files": [{"path": "~/.demo-settings", "json": {"DEVICE": "llvm_cpu.0"}},
                     {"path": "etc/demo.json", "json": {"DEVICE": "llvm_cpu.0"}}],
           "env": {"DEMO_DEVICE": "llvm_cpu.0"},
           "commands": ["python -m pip install demo-app", "printf '%s\\n' '{}' > \"$HOME\"/.demo-settings"]}
    path = work / "recipe.json"
    path.write_text(json.dumps(rec))
    return path


def _env(work: Path) -> Dict[str, str]:
    env = cli_env(work)
    env["HOME"] = str(work / "home")
    return env


def _install(work: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    (work / "home").mkdir(exist_ok=True)
    (work / "cwd").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "mlprobe", "install", *args], cwd=work / "cwd",
                          capture_output=True, text=True, timeout=300, env=_env(work))


def _steps(out: str) -> str:
    return out.split("Steps", 1)[1].split("Index checks", 1)[0]


def test_the_steps_say_which_file_is_written_and_the_commands_are_not_steps(tmp_path: Path,
                                                                            index: LocalIndex) -> None:
    venv = tmp_path / "venv"
    cp = _install(tmp_path, "--recipe-file", str(_recipe(tmp_path)), "--index-url", index.url, "--venv", str(venv))
    assert cp.returncode == 0, cp.stderr
    steps = " ".join(_steps(cp.stdout).split())
    assert "shown, not run" not in cp.stdout
    assert f"write {venv / 'etc' / 'demo.json'}" in steps
    assert "~/.demo-settings is not written (it is outside the venv" in steps
    assert "write ~/.demo-settings" not in steps
    by_hand = cp.stdout.split("By hand", 1)[1]
    assert "$ python -m pip install demo-app" in by_hand
    assert "nothing was installed" in cp.stdout  # a dry run's table, without --apply


def test_under_apply_what_is_said_is_what_happened(tmp_path: Path, index: LocalIndex) -> None:
    venv = tmp_path / "venv"
    cp = _install(tmp_path, "-v", "--recipe-file", str(_recipe(tmp_path)), "--index-url", index.url, "--venv",
                  str(venv), "--apply", "--no-verify")
    assert cp.returncode == 0, cp.stderr
    assert "nothing was installed" not in cp.stdout and "will land" in cp.stdout
    assert (venv / "etc" / "demo.json").is_file()
    assert not (tmp_path / "home" / ".demo-settings").exists()  # as the step said
    assert re.search(r"installing with pip: (demo-app|the \d+ file\(s\) pip resolved)", cp.stderr), cp.stderr
    # the same environment again, from the lock it wrote: no requirement is named on the line
    lock = venv / "pylock.toml"
    assert lock.is_file()
    cp = _install(tmp_path, "-v", "--from-lock", str(lock), "--index-url", index.url, "--venv",
                  str(tmp_path / "venv2"), "--apply", "--no-verify")
    assert cp.returncode == 0, cp.stderr
    assert not re.search(r"installing with \w+: *$", cp.stderr, re.M), cp.stderr
    assert re.search(r"installing the files of the lock with \w+|installing with \w+: the \d+ file\(s\) \w+ resolved",
                     cp.stderr), cp.stderr
    assert not (tmp_path / "home" / ".demo-settings").exists()
