"""Text from a capture is data, never terminal control: escape sequences, control characters and
rich markup in a GPU name, an OS name or a probe error are shown as text in every terminal output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import List

import pytest

from mlprobe import ui

from .conftest import FIXTURES
from .test_cli_errors import bundle, run

EVIL_NAME = "NVIDIA \x1b[31mGeForce\x1b]0;pwned\x07 RTX\x1b[2J [bold red]3060[/] \x08\x0c\x9b"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def hostile(tmp_path: Path) -> Path:
    csv = ("name, driver_version, compute_cap, memory.total [MiB], pci.bus_id, uuid\n"
           f"{EVIL_NAME}, 570.124.04, 8.6, 12288 MiB, 00000000:01:00.0, "
           "GPU-11111111-2222-3333-4444-555555555555\n")
    return bundle(tmp_path / "evil", {
        "nvidia-smi-query.csv": csv,
        "os-release.txt": 'NAME="Evil\x1b[5mOS"\nPRETTY_NAME="Evil \x1b[5mLinux\x1b[0m 1"\nID=evil\n',
        "lspci.txt": "\x1b[31mgarbage\x1b[0m that is not lspci\n",
    })


@pytest.mark.parametrize("argv", [["scan"], ["plan"], ["plan", "--why-not", "torch-cuda"], ["install"],
                                  ["report", "--format", "markdown"],
                                  ["report", "--format", "markdown", "--include-raw"],
                                  ["report", "--format", "markdown", "--include-raw", "--no-redact"]])
def test_terminal_output_has_no_raw_control_characters(tmp_path: Path, argv: List[str]) -> None:
    b = hostile(tmp_path)
    if argv[0] == "install":
        argv = [*argv, "--index-url", "http://127.0.0.1:9/simple/"]
    rc, out, err = run(*argv, "--replay", b)
    assert rc in ((0, 1, 3) if argv[0] == "install" else (0,)), err
    assert not RAW.search(out), repr(out)
    assert not RAW.search(err), repr(err)
    if argv == ["scan"]:
        assert "\\x07" in out and "[bold red]3060[/]" in out  # shown, not obeyed


def test_diff_table_has_no_raw_control_characters(tmp_path: Path) -> None:
    b = hostile(tmp_path)
    rc, out, _ = run("diff", b, FIXTURES / "linux-nvidia-rtx3060-smi-xml")
    assert rc == 1
    assert not RAW.search(out), repr(out)
    assert "\\x1b" in out


def test_json_keeps_the_exact_value(tmp_path: Path) -> None:
    """Escaping is for terminals; the JSON carries the capture's text as it was."""
    rc, out, _ = run("scan", "--json", "--replay", hostile(tmp_path))
    assert rc == 0
    names = [g["name"] for g in json.loads(out)["gpus"]]
    assert any("\x07" in (n or "") for n in names)


def test_safe_escapes_every_control_character() -> None:
    for c in list(range(0, 9)) + list(range(11, 32)) + list(range(127, 160)):
        assert not RAW.search(ui.safe(f"a{chr(c)}b"))
    assert ui.safe("tab\tand\nnewline") == "tab\tand\nnewline"
    assert ui.safe("\u202eevil") == "\\u202eevil"  # bidi override


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_report_json_escapes_what_a_terminal_would_obey_and_keeps_the_values(tmp_path: Path, fmt: str) -> None:
    """json.dumps(ensure_ascii=False) leaves C1 controls (\\x9b is CSI to an 8-bit terminal) and
    bidirectional marks raw; the report writes them as \\u escapes, which are the same JSON values."""
    b = bundle(tmp_path / "c1", {
        "nvidia-smi-query.csv": "name, driver_version, compute_cap, memory.total [MiB], pci.bus_id, uuid\n"
                                "NVIDIA \x9b31mRTX\u202e 3060, 570.124.04, 8.6, 12288 MiB, 00000000:01:00.0, "
                                "GPU-11111111-2222-3333-4444-555555555555\n"})
    rc, out, err = run("report", "--format", fmt, "--replay", b)
    assert rc == 0, err
    assert "\x9b" not in out and "\u202e" not in out and not RAW.search(out)
    if fmt == "json":
        names = [g["name"] for g in json.loads(out)["scan"]["gpus"]]
        assert any("\x9b" in (n or "") and "\u202e" in n for n in names)
    else:
        block = re.search(r"```json\n(.*?)\n```", out, re.S)
        assert block and "\\u009b" in block.group(1)
        json.loads(block.group(1))


def _on_a_pty(argv: List[str], timeout: float = 120) -> bytes:
    """mlprobe with stdout and stderr on one real pseudo-terminal (colours on, as a person sees it)."""
    import os
    import pty
    import subprocess
    import sys

    from .conftest import ROOT
    from .ptyio import drain

    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="200", PYTHONPATH=str(ROOT))
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "mlprobe", *argv], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    try:
        seen = drain(master, proc, timeout)
        assert proc.wait(timeout=30) in (0, 1, 3), seen.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return seen


# mlprobe's own styling on a terminal: SGR colours (ESC [ ... m) and, from rich, line erasing for
# the progress line; whatever else remains came from a capture.
_OWN = re.compile(rb"\x1b\[[0-9;]*m|\x1b\[2K|\x1b\[\?25[hl]|\x1b\[1A|\r|\n")


@pytest.mark.skipif(not hasattr(__import__("os"), "openpty") or __import__("sys").platform == "darwin",
                    reason="needs a pseudo-terminal (Linux)")
@pytest.mark.parametrize("argv", [["scan"], ["plan"], ["report", "--format", "markdown"]])
def test_a_real_terminal_shows_capture_escapes_as_text(tmp_path: Path, argv: List[str]) -> None:
    seen = _on_a_pty([*argv, "--replay", str(hostile(tmp_path))])
    assert b"\x1b[" in seen or argv[0] == "report", "no colours: this was not a terminal"
    rest = _OWN.sub(b"", seen)
    text = rest.decode("utf-8", "replace")
    assert not RAW.search(text), repr(text)
    for planted in (b"\x1b]0;pwned\x07", b"\x1b[2J", b"\x1b[5m", b"\x1b[31mGeForce", b"\x08", b"\x0c",
                    "\x9b".encode()):
        assert planted not in seen, planted
    if argv[0] != "plan":  # the plan does not show the GPU name
        assert "\\x1b" in text
