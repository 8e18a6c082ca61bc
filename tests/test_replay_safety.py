"""A capture bundle is untrusted input: replay reads only regular files inside it (no symlink is
followed, nothing outside the folder is read), never hangs on a FIFO, caps sizes like a live
capture, and records an unreadable capture as a probe error, not as "not in this capture".
Documents from a newer mlprobe are refused; a document with a wrong type names the field."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Dict

import pytest

from mlprobe.scan.capture import SPECS
from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES
from .test_cli_errors import run, user_error

BUNDLE = FIXTURES / "linux-nvidia-rtx3060-smi-xml"
SECRET = "root:x:0:0:PLANTED-OUTSIDE-THE-BUNDLE"


def copy_bundle(tmp_path: Path) -> Path:
    dst = tmp_path / "bundle"
    shutil.copytree(BUNDLE, dst)
    return dst


def probe(report: Dict[str, Any], name: str) -> Dict[str, Any]:
    return next(p for p in report["probes"] if p["name"] == name)


def test_a_symlink_to_a_file_outside_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "passwd"
    outside.write_text(f"Package Version\n{SECRET} 1.0\ntorch 2.13.0\n", encoding="utf-8")
    b = copy_bundle(tmp_path)
    (b / "pip-list.txt").symlink_to(outside)
    host = ReplayHost(b)
    cap = host.get("pip-list.txt")
    assert cap.status == "error" and "symbolic link" in (cap.error or "")
    assert cap.data is None
    rc, out, err = run("report", "--replay", b, "--include-raw")
    assert rc == 0, err
    assert "PLANTED-OUTSIDE" not in out
    doc = json.loads(out)
    assert "pip-list.txt" not in doc["capture_bundle"]["files"]


def test_a_symlink_inside_the_bundle_is_not_followed_either(tmp_path: Path) -> None:
    b = copy_bundle(tmp_path)
    (b / "lspci.txt").symlink_to(b / "nvidia-smi-q-x.xml")
    assert ReplayHost(b).get("lspci.txt").status == "error"


def test_a_symlinked_bundle_folder_given_by_the_user_still_replays(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(BUNDLE)
    rc, out, err = run("scan", "--replay", link, "--json")
    assert rc == 0, err
    assert json.loads(out)["gpus"]


def test_a_fifo_does_not_hang_and_is_a_probe_error(tmp_path: Path) -> None:
    b = copy_bundle(tmp_path)
    os.mkfifo(b / "lspci.txt")
    result: Dict[str, Any] = {}

    def go() -> None:
        result["report"] = facts_to_report(scan(ReplayHost(b)))

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive(), "replay hung on a FIFO"
    pci = probe(result["report"], "pci")
    assert pci["status"] == "error" and "lspci.txt" in pci["error"] and "not a regular file" in pci["error"]


@pytest.mark.parametrize("kind", ["dev-zero", "loop", "folder", "dangling"])
def test_unreadable_captures_are_probe_errors(tmp_path: Path, kind: str) -> None:
    b = copy_bundle(tmp_path)
    target = b / "lspci.txt"
    if kind == "dev-zero":
        target.symlink_to("/dev/zero")
    elif kind == "loop":
        (b / "loop2").symlink_to(target)
        target.symlink_to(b / "loop2")
    elif kind == "folder":
        target.mkdir()
    else:
        target.symlink_to(tmp_path / "nowhere")
    report = facts_to_report(scan(ReplayHost(b)))
    pci = probe(report, "pci")
    assert pci["status"] == "error", pci
    assert "lspci.txt" in pci["error"]


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root reads any file")
def test_permission_denied_is_a_probe_error(tmp_path: Path) -> None:
    b = copy_bundle(tmp_path)
    (b / "lspci.txt").write_text("00:02.0 VGA compatible controller [0300]: x [8086:3e92]\n")
    (b / "lspci.txt").chmod(0)
    pci = probe(facts_to_report(scan(ReplayHost(b))), "pci")
    assert pci["status"] == "error" and "permission" in pci["error"].lower()


def _scan_as(uid: int, folder: Path) -> Dict[str, Any]:
    """scan(ReplayHost(folder)) in a forked child that has dropped to `uid` (and its group)."""
    scan(ReplayHost(folder))  # as root first: the child may not read the modules the scan imports
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            out = json.dumps(facts_to_report(scan(ReplayHost(folder)))).encode()
            with os.fdopen(w, "wb") as fh:
                fh.write(out)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data, "the child scan failed"
    doc: Dict[str, Any] = json.loads(data)
    return doc


@pytest.mark.skipif(not hasattr(os, "fork") or os.geteuid() != 0, reason="needs root to become another user")
def test_permission_denied_as_another_user_is_a_probe_error() -> None:
    """Run as root, the test drops to uid 65534 (nobody) in a child: lspci.txt is root's, mode 600."""
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="mlprobe-perm-"))
    try:
        top.chmod(0o755)
        b = top / "bundle"
        shutil.copytree(BUNDLE, b)
        for p in [b, *b.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        (b / "lspci.txt").write_text("00:02.0 VGA compatible controller [0300]: x [8086:3e92]\n")
        (b / "lspci.txt").chmod(0o600)
        report = _scan_as(65534, b)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    pci = probe(report, "pci")
    assert pci["status"] == "error", pci
    assert "lspci.txt" in pci["error"] and "permission" in pci["error"].lower(), pci
    assert report["gpus"], "the other captures are still read"


def test_replay_caps_sizes_like_a_live_capture(tmp_path: Path) -> None:
    b = copy_bundle(tmp_path)
    cap = SPECS["lspci.txt"].max_bytes
    line = b"01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA106 [10de:2503] (rev a1)\n"
    (b / "lspci.txt").write_bytes(line * (cap // len(line) + 1000))
    got = ReplayHost(b).get("lspci.txt")
    assert got.data is not None and len(got.data) <= cap


def test_report_embedded_captures_are_capped(tmp_path: Path) -> None:
    cap = SPECS["lspci.txt"].max_bytes
    doc = {"report_version": 1, "scan": {}, "capture_bundle": {"files": {
        "lspci.txt": {"text": "x" * (cap + 5000)}, "host.json": {"text": "{}"}}}}
    (tmp_path / "r.json").write_text(json.dumps(doc), encoding="utf-8")
    data = ReplayHost(tmp_path / "r.json").get("lspci.txt").data
    assert data is not None and len(data) <= cap


# -- versions and types of documents ----------------------------------------------------------------


def report_doc(**changes: Any) -> Dict[str, Any]:
    rc, out, err = run("report", "--replay", BUNDLE, "--include-raw")
    assert rc == 0, err
    doc: Dict[str, Any] = json.loads(out)
    doc.update(changes)
    return doc


@pytest.mark.parametrize("command", ["scan", "diff"])
def test_a_newer_major_report_version_is_refused(tmp_path: Path, command: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report_doc(report_version=99)), encoding="utf-8")
    argv = ["scan", "--replay", path] if command == "scan" else ["diff", path, BUNDLE]
    rc, _, err = run(*argv)
    user_error(rc, err)
    assert "report_version 99" in err and "newer" in err


def test_a_newer_scan_json_is_refused_by_diff(tmp_path: Path) -> None:
    rc, out, _ = run("scan", "--json", "--replay", BUNDLE)
    doc = json.loads(out)
    doc["report_version"] = 2
    (tmp_path / "s.json").write_text(json.dumps(doc), encoding="utf-8")
    rc, _, err = run("diff", tmp_path / "s.json", BUNDLE)
    user_error(rc, err)
    assert "report_version 2" in err


@pytest.mark.parametrize("path,value,expected", [
    (("cpu", "flags"), {"avx": True}, "scan.cpu.flags"),
    (("gpus",), {"0": {}}, "scan.gpus"),
    (("gpus", 0), "nvidia", "scan.gpus[0]"),
    (("cpu",), [], "scan.cpu"),
    (("report_version",), "1", "report_version"),
    (("frameworks",), "torch", "scan.frameworks"),
])
def test_wrong_types_name_the_field(tmp_path: Path, path: Any, value: Any, expected: str) -> None:
    doc = report_doc()
    if path == ("report_version",):
        doc["report_version"] = value
    else:
        obj = doc["scan"]
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    (tmp_path / "r.json").write_text(json.dumps(doc), encoding="utf-8")
    rc, _, err = run("diff", tmp_path / "r.json", BUNDLE)
    user_error(rc, err)
    assert expected in err


def test_diff_of_a_fifo_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.json")
    result: Dict[str, Any] = {}
    t = threading.Thread(target=lambda: result.update(r=run("diff", tmp_path / "pipe.json", BUNDLE)),
                         daemon=True)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive(), "diff hung on a FIFO"
    rc, _, err = result["r"]
    user_error(rc, err)
    assert "FIFO" in err


def test_live_file_captures_never_block_on_a_fifo_or_read_a_device(tmp_path: Path) -> None:
    from mlprobe.scan.host import LiveHost

    os.mkfifo(tmp_path / "fifo")
    host = LiveHost()
    cap = host.read_file("os-release.txt", str(tmp_path / "fifo"))
    assert cap.status == "error" and "FIFO" in (cap.error or "")
    cap = host.read_file("os-release.txt", "/dev/zero")
    assert cap.status == "error" and "device" in (cap.error or "")


@pytest.mark.parametrize("command", ["scan", "diff"])
@pytest.mark.parametrize("name,entry,expected", [
    ("lspci.txt", ["01:00.0 VGA"], "capture_bundle.files.lspci.txt is a JSON list"),
    ("host.json", "plain string", "capture_bundle.files.host.json is a string"),
    ("proc-cpuinfo.txt", {"text": 5}, "capture_bundle.files.proc-cpuinfo.txt.text is a number"),
    ("nvidia-smi-q-x.xml", {"base64": {"x": 1}}, "capture_bundle.files.nvidia-smi-q-x.xml.base64 is a JSON object"),
    ("uname.txt", {"size": 3}, 'capture_bundle.files.uname.txt has neither "text" nor "base64"'),
])
def test_an_embedded_capture_of_the_wrong_type_names_its_field(tmp_path: Path, command: str, name: str,
                                                               entry: Any, expected: str) -> None:
    """Before: such an entry was silently left out, and the replay said the capture was not there."""
    doc = report_doc()
    doc["capture_bundle"]["files"][name] = entry
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    argv = ["scan", "--replay", path] if command == "scan" else ["diff", path, BUNDLE]
    rc, _, err = run(*argv)
    user_error(rc, err)
    assert expected in err, err
    if command == "scan":
        assert "[E101]" in err


def test_capture_bundle_files_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    doc = report_doc()
    doc["capture_bundle"]["files"] = ["lspci.txt"]
    (tmp_path / "r.json").write_text(json.dumps(doc), encoding="utf-8")
    rc, _, err = run("scan", "--replay", tmp_path / "r.json")
    user_error(rc, err)
    assert "capture_bundle.files is a JSON list, expected a JSON object" in err


@pytest.mark.parametrize("command", ["scan", "diff"])
def test_a_report_version_that_is_a_string_is_refused_naming_it(tmp_path: Path, command: str) -> None:
    """"1.5" (a string): refused, since mlprobe writes report_version as a number."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report_doc(report_version="1.5")), encoding="utf-8")
    argv = ["scan", "--replay", path] if command == "scan" else ["diff", path, BUNDLE]
    rc, _, err = run(*argv)
    user_error(rc, err)
    assert "report_version is a string ('1.5'), expected a number" in err


@pytest.mark.parametrize("version", [1.5, None])
def test_a_minor_or_missing_report_version_is_read_as_version_1(tmp_path: Path, version: Any) -> None:
    """Documented acceptance (docs/report.md): 1.5 is major version 1 with additions this
    mlprobe ignores; a document without report_version (a hand-made one) is read as version 1."""
    doc = report_doc()
    doc.pop("schema")
    doc["scan"].pop("schema")
    if version is not None:
        doc["report_version"] = version
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    rc, out, err = run("scan", "--json", "--replay", path)
    assert rc == 0, err
    rc2, want, _ = run("scan", "--json", "--replay", BUNDLE)
    gpus = [g["name"] for g in json.loads(out)["gpus"]]
    assert gpus and gpus == [g["name"] for g in json.loads(want)["gpus"]]
    rc, out, err = run("diff", path, BUNDLE)
    assert rc in (0, 1) and "error" not in err, err
