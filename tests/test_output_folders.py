"""Commands that write a folder (capture, bundle) follow a symlink to an empty folder, as install
--venv does: the files land where the link leads and the link stays. An error names its real cause
(no space, no permission, a read-only file system, a path part that is no folder), not "free some
space" for every one."""

from __future__ import annotations

import argparse
import errno
from pathlib import Path

import pytest

from mlprobe.model.folders import cause_and_next, real_folder


def test_capture_into_a_symlink_to_an_empty_folder_writes_there(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from mlprobe.commands import capture
    from mlprobe.doctor import enumerate as doctor_enumerate
    from mlprobe.scan import host as scan_host

    empty = tmp_path / "empty"
    empty.mkdir()
    link = tmp_path / "link"
    link.symlink_to(empty)
    monkeypatch.setattr(doctor_enumerate, "install_producer", lambda: None)  # no framework children: faster
    real_write = scan_host.write_bundle
    monkeypatch.setattr(scan_host, "write_bundle",
                        lambda host, folder, names=None: real_write(host, folder, ["uname.txt", "host.json"]))
    assert capture.run(argparse.Namespace(dir=str(link))) == 0
    assert link.is_symlink() and link.resolve() == empty.resolve()
    assert (empty / "uname.txt").is_file() and (empty / "host.json").is_file()
    assert "symlink" in capsys.readouterr().err


def test_a_symlink_to_a_folder_that_is_not_empty_is_refused_as_that_folder(tmp_path: Path) -> None:
    from mlprobe.commands import capture
    from mlprobe.errors import MlprobeError

    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(full)
    with pytest.raises(MlprobeError) as e:
        capture.run(argparse.Namespace(dir=str(link)))
    assert e.value.ref == "E102" and str(full) in e.value.what
    assert (full / "mine.txt").read_text() == "keep"


def test_real_folder_follows_a_link_to_a_folder_only(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "d")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert real_folder(tmp_path / "l") == (tmp_path / "d").resolve()
    assert real_folder(tmp_path / "dangling") == tmp_path / "dangling"
    assert real_folder(tmp_path / "new") == tmp_path / "new"


@pytest.mark.parametrize("code,words", [(errno.ENOSPC, "free some space"), (errno.EACCES, "can write"),
                                        (errno.EROFS, "read-only"), (errno.ENOTDIR, "not a folder"),
                                        (errno.EIO, "another place")])
def test_each_cause_gets_its_own_next_step(code: int, words: str) -> None:
    why, step = cause_and_next(OSError(code, "x", "/some/file"), Path("/some"))
    assert words in step and "/some/file" in why
    if code != errno.ENOSPC:
        assert "space" not in step
