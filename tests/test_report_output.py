"""Where `mlprobe report -o FILE` writes: a regular file is replaced whole, but a device (`-o
/dev/null` as root), a FIFO or `/dev/stdout` is written in place, never replaced by a regular file,
and a symbolic link keeps pointing where it did."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path
from typing import List

import pytest

from mlprobe.cli import main

from .conftest import FIXTURES

BUNDLE = str(FIXTURES / "linux-nvidia-h100-smi")

posix_only = pytest.mark.skipif(os.name != "posix", reason="FIFOs and device nodes are POSIX")


def report_to(path: Path, capsys: pytest.CaptureFixture[str]) -> int:
    rc = main(["report", "--replay", BUNDLE, "-o", str(path)])
    capsys.readouterr()
    return rc


@posix_only
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mknod needs root")
def test_a_character_device_stays_a_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    null = tmp_path / "null"
    # A node of its own: the real /dev/null must never be what a regression replaces.
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
    assert report_to(null, capsys) == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode), "the device node was replaced by a regular file"
    assert [p.name for p in tmp_path.iterdir()] == ["null"]


@posix_only
def test_a_fifo_with_a_reader_gets_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: List[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    import time

    time.sleep(0.2)  # the reader is waiting in open()
    assert report_to(fifo, capsys) == 0
    t.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got[0])["schema"] == "mlprobe.report/2"


@posix_only
def test_a_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    rc = main(["report", "--replay", BUNDLE, "-o", str(fifo)])
    err = capsys.readouterr().err
    assert rc == 2 and "[E801]" in err and "no process is reading" in err, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_a_symlink_keeps_pointing_at_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "reports" / "latest.json"
    real.parent.mkdir()
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "report.json"
    link.symlink_to(real)
    assert report_to(link, capsys) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text(encoding="utf-8"))["schema"] == "mlprobe.report/2"
