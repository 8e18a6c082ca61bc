"""Output never fails on encoding: a bundle folder whose name is not UTF-8, a terminal that only
speaks ASCII (PYTHONIOENCODING=ascii), and an error on the way never leave a 0-byte output file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from .conftest import FIXTURES, ROOT

# slow: every command as a real process, from a folder with a non-UTF-8 name, on two terminal encodings
pytestmark = pytest.mark.slow

BUNDLE = FIXTURES / "linux-nvidia-rtx3060-smi-xml"
AMD = FIXTURES / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"


def mlprobe(argv: List[bytes], cwd: Path, encoding: str) -> "subprocess.CompletedProcess[bytes]":
    env = dict(os.environ, PYTHONIOENCODING=encoding, PYTHONPATH=str(ROOT))
    return subprocess.run([os.fsencode(sys.executable), b"-m", b"mlprobe", *argv], capture_output=True,
                          cwd=cwd, env=env, timeout=180)


@pytest.fixture(scope="module")
def odd_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if sys.platform == "darwin":
        pytest.skip("macOS file systems refuse names that are not UTF-8")
    base = tmp_path_factory.mktemp("enc")
    shutil.copytree(os.fsencode(BUNDLE), os.path.join(os.fsencode(base), b"bundle-\xff\xfe"))
    return base


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
@pytest.mark.parametrize("argv", [
    [b"scan", b"--replay", b"bundle-\xff\xfe"],
    [b"scan", b"--json", b"--replay", b"bundle-\xff\xfe"],
    [b"plan", b"--replay", b"bundle-\xff\xfe"],
    [b"report", b"--include-raw", b"--replay", b"bundle-\xff\xfe"],
    [b"report", b"--format", b"markdown", b"--replay", b"bundle-\xff\xfe"],
    [b"diff", b"bundle-\xff\xfe", os.fsencode(FIXTURES / "linux-nvidia-h100-smi")],
    [b"install", b"--replay", b"bundle-\xff\xfe"],
    [b"capture", b"new-\xff"],
])
def test_non_utf8_names_and_ascii_terminals(odd_folder: Path, encoding: str, argv: List[bytes]) -> None:
    if argv[0] == b"capture":
        shutil.rmtree(os.path.join(os.fsencode(odd_folder), b"new-\xff"), ignore_errors=True)
    p = mlprobe(argv, odd_folder, encoding)
    err = p.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in p.stderr, err
    assert p.returncode in (0, 1, 3), err
    if argv[0] != b"capture":
        assert p.stdout.strip(), f"no output: {err}"
    if b"--json" in argv or (argv[0] == b"report" and b"markdown" not in argv):
        json.loads(p.stdout)


@pytest.mark.parametrize("name", ["out.json", "out.md"])
def test_report_to_a_file_from_a_non_utf8_folder(odd_folder: Path, name: str) -> None:
    p = mlprobe([b"report", b"-o", name.encode(), b"--replay", b"bundle-\xff\xfe"], odd_folder, "ascii")
    assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    out = (odd_folder / name).read_bytes()
    assert out, "0-byte report"
    text = out.decode("utf-8")  # valid UTF-8, whatever the folder's name
    assert "bundle-\\xff\\xfe" in text.replace("\\\\", "\\")


@pytest.mark.parametrize("command", ["plan", "diff", "scan", "report"])
def test_ascii_terminal_with_non_ascii_output(command: str, tmp_path: Path) -> None:
    argv = {"plan": [b"plan", b"--replay", os.fsencode(AMD)],
            "diff": [b"diff", os.fsencode(AMD), os.fsencode(BUNDLE)],
            "scan": [b"scan", b"--replay", os.fsencode(AMD)],
            "report": [b"report", b"--format", b"markdown", b"--replay", os.fsencode(AMD)]}[command]
    p = mlprobe(argv, tmp_path, "ascii")
    assert b"Traceback" not in p.stderr, p.stderr.decode("utf-8", "replace")
    assert p.returncode in (0, 1)
    p.stdout.decode("ascii")


def test_a_failed_report_write_leaves_no_empty_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe import ui

    target = tmp_path / "keep.json"
    target.write_text("previous report", encoding="utf-8")

    def boom(*_a: object, **_k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        ui.write_file(target, "new text")
    assert target.read_text(encoding="utf-8") == "previous report"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]
