"""Bad input to a command gives an error a person can act on (an exit code, a `next:` step), never a
traceback; where only some captures of a bundle are garbage, the scan still finishes and says which."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Dict, Tuple, Union

import pytest

from mlprobe import cli
from mlprobe.errors import EXIT_UNAVAILABLE, EXIT_USAGE

from .conftest import FIXTURES, ROOT

BUNDLE = FIXTURES / "linux-nvidia-rtx3060-smi-xml"
DEEP = "[" * 100_000  # nests deeper than Python's JSON decoder can follow


def run(*argv: Union[str, Path]) -> Tuple[int, str, str]:
    """mlprobe in this process; an exception escaping main() fails the test by itself."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = cli.main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's own usage errors
            rc = int(exc.code or 0)
    assert "Traceback" not in err.getvalue()
    return rc, out.getvalue(), err.getvalue()


def user_error(rc: int, err: str, code: int = EXIT_USAGE) -> None:
    assert rc == code, err
    assert "error [E" in err and "\n  next: " in err, err


def bundle(folder: Path, files: Dict[str, Union[str, bytes]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        path = folder / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    return folder


# -- scan --replay ----------------------------------------------------------------------------------


def test_replay_of_a_file_that_is_not_a_report() -> None:
    rc, _, err = run("scan", "--replay", "/etc/passwd")
    user_error(rc, err)
    assert "E101" in err


def test_replay_of_an_empty_folder(tmp_path: Path) -> None:
    rc, _, err = run("scan", "--replay", tmp_path)
    user_error(rc, err)
    assert "holds no capture files" in err


def test_replay_of_a_folder_without_capture_names(tmp_path: Path) -> None:
    bundle(tmp_path, {"notes.txt": "hello", "passwd": "root:x:0:0"})
    rc, _, err = run("scan", "--replay", tmp_path)
    user_error(rc, err)
    assert "holds no capture files" in err


def test_garbage_under_real_capture_names_still_scans(tmp_path: Path) -> None:
    noise = bytes(range(256)) * 12
    bundle(tmp_path, {
        "nvidia-smi-q-x.xml": noise,
        "rocminfo.txt": noise[::-1],
        "lspci.txt": noise[7:900],
        "clinfo.json": "not json {",
        "mlprobe-frameworks.json": DEEP,
        "proc-cpuinfo.txt": "\x00\x01\x02",
    })
    rc, out, err = run("scan", "--replay", tmp_path, "--json")
    assert rc == 0, err
    report = json.loads(out)
    status = {p["name"]: (p["status"], p.get("error") or "") for p in report["probes"]}
    for probe, capture in (("nvidia", "nvidia-smi-q-x.xml"), ("rocm", "rocminfo.txt"),
                           ("pci", "lspci.txt"), ("opencl", "clinfo.json"),
                           ("frameworks", "mlprobe-frameworks.json")):
        assert status[probe][0] == "error" and capture in status[probe][1], (probe, status[probe])
    assert "RecursionError" not in json.dumps(report)  # the parser said it, not the scan's safety net
    assert report["gpus"] == []


def test_host_json_that_is_a_list(tmp_path: Path) -> None:
    bundle(tmp_path, {"host.json": "[1, 2, 3]", "lspci.txt": "00:02.0 VGA compatible controller: x\n"})
    rc, _, err = run("scan", "--replay", tmp_path)
    user_error(rc, err)
    assert "host.json" in err and "list" in err


@pytest.mark.parametrize("host_json", ["not json {", DEEP], ids=["not-json", "too-deep"])
def test_host_json_that_does_not_parse(tmp_path: Path, host_json: str) -> None:
    bundle(tmp_path, {"host.json": host_json})
    rc, _, err = run("plan", "--replay", tmp_path)
    user_error(rc, err)
    assert "host.json" in err


def test_replay_of_a_report_too_deep_to_read(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(DEEP)
    rc, _, err = run("scan", "--replay", tmp_path / "r.json")
    user_error(rc, err)


def test_replay_of_a_report_with_broken_base64(tmp_path: Path) -> None:
    doc = {"capture_bundle": {"files": {"lspci.txt": {"base64": "abc"}}}}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    rc, _, err = run("scan", "--replay", tmp_path / "r.json")
    user_error(rc, err)
    assert "base64" in err


def test_replay_of_a_report_with_good_base64_still_works(tmp_path: Path) -> None:
    xml = (BUNDLE / "nvidia-smi-q-x.xml").read_bytes()
    files = {"host.json": {"text": '{"system": "Linux"}'},
             "nvidia-smi-q-x.xml": {"base64": base64.b64encode(xml).decode()}}
    (tmp_path / "r.json").write_text(json.dumps({"capture_bundle": {"files": files}}))
    rc, out, err = run("scan", "--replay", tmp_path / "r.json", "--json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["os"]["system"] == "Linux" and [g["vendor"] for g in report["gpus"]] == ["nvidia"]


# -- plan ---------------------------------------------------------------------------------------------


def test_plan_why_not_an_unknown_recipe() -> None:
    rc, _, err = run("plan", "--replay", BUNDLE, "--why-not", "nosuchrecipe")
    user_error(rc, err)
    assert "torch-cpu" in err  # it lists the recipes there are


@pytest.mark.parametrize("python", ["3.x", "abc", "3", ""])
def test_plan_python_that_is_not_a_version(python: str) -> None:
    rc, _, err = run("plan", "--replay", BUNDLE, "--python", python)
    user_error(rc, err)
    assert "E201" in err


# -- diff ---------------------------------------------------------------------------------------------


def test_diff_of_missing_files(tmp_path: Path) -> None:
    rc, _, err = run("diff", tmp_path / "missing.json", tmp_path / "other.json")
    user_error(rc, err)
    assert "missing.json" in err


@pytest.mark.parametrize("content", ["xx", DEEP, "[1, 2]", "{}"], ids=["text", "too-deep", "list", "empty-object"])
def test_diff_of_a_file_that_is_not_a_report(tmp_path: Path, content: str) -> None:
    (tmp_path / "a.json").write_text(content)
    rc, _, err = run("diff", tmp_path / "a.json", tmp_path / "a.json")
    user_error(rc, err)
    assert "E701" in err


def test_diff_of_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    rc, _, err = run("diff", tmp_path / "empty", BUNDLE)
    user_error(rc, err)
    assert "holds no capture files" in err


# -- report -------------------------------------------------------------------------------------------


def test_report_into_a_folder_that_does_not_exist(tmp_path: Path) -> None:
    target = tmp_path / "nonexistent" / "dir" / "x.json"
    rc, _, err = run("report", "--replay", BUNDLE, "-o", target)
    user_error(rc, err)
    assert "does not exist" in err and not target.exists()


def test_report_onto_a_folder(tmp_path: Path) -> None:
    rc, _, err = run("report", "--replay", BUNDLE, "-o", tmp_path)
    user_error(rc, err)
    assert "is a folder" in err


def test_report_error_through_the_real_entry_point(tmp_path: Path) -> None:
    """Checked before any scan: the refusal is immediate, also without --replay."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "mlprobe", "report", "-o", str(tmp_path / "nonexistent" / "x.json")],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "Traceback" not in proc.stderr and "\n  next: " in proc.stderr


# -- capture ------------------------------------------------------------------------------------------


def test_capture_into_a_path_below_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    rc, _, err = run("capture", tmp_path / "file" / "bundle")
    user_error(rc, err)
    assert "E103" in err


# -- install ------------------------------------------------------------------------------------------


def test_install_an_unknown_recipe() -> None:
    rc, _, err = run("install", "--replay", BUNDLE, "--recipe", "nosuch")
    user_error(rc, err)
    assert "nosuch" in err


def test_install_for_a_python_that_is_not_here(tmp_path: Path) -> None:
    rc, out, err = run("plan", "--replay", BUNDLE, "--json")
    assert rc == 0, err
    (tmp_path / "plan.json").write_text(out)  # a plan file: no scan of this machine needed
    rc, _, err = run("install", "--recipe-file", tmp_path / "plan.json", "--python", "9.9")
    user_error(rc, err, code=EXIT_UNAVAILABLE)
    assert "no Python 9.9" in err


@pytest.mark.parametrize("content", ["not json", DEEP, "[1]"], ids=["text", "too-deep", "list"])
def test_install_from_a_recipe_file_that_is_not_one(tmp_path: Path, content: str) -> None:
    (tmp_path / "r.json").write_text(content)
    rc, _, err = run("install", "--recipe-file", tmp_path / "r.json")
    user_error(rc, err)
    assert "E513" in err


@pytest.mark.skipif(os.name != "posix", reason="FIFOs and /dev/zero are POSIX")
@pytest.mark.parametrize("what", ["fifo", "zero", "folder", "huge"])
def test_a_recipe_file_that_never_ends_is_refused_not_read(tmp_path: Path, what: str) -> None:
    """`--recipe-file /dev/zero` read until memory ran out and a FIFO hung; both are refused now."""
    from mlprobe.commands.install import RECIPE_FILE_MAX_BYTES

    path = tmp_path / "r.json"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "zero":
        path = Path("/dev/zero")
    elif what == "folder":
        path = tmp_path
    else:
        with open(path, "wb") as fh:
            fh.truncate(RECIPE_FILE_MAX_BYTES + 10)
    rc, _, err = run("install", "--recipe-file", path)
    user_error(rc, err)
    assert "E513" in err


@pytest.mark.skipif(os.name != "posix", reason="FIFOs are POSIX")
@pytest.mark.parametrize("what", ["fifo", "folder"])
def test_an_install_log_that_is_not_a_file_is_refused_first(tmp_path: Path, what: str) -> None:
    """`--log FIFO` waited for ever in open() (holding the target's lock); a folder failed late."""
    log = tmp_path / "log"
    if what == "fifo":
        os.mkfifo(log)
    else:
        log.mkdir()
    (tmp_path / "r.json").write_text(json.dumps({"recipe": "demo", "packages": ["demo-app"]}))
    rc, _, err = run("install", "--recipe-file", tmp_path / "r.json", "--apply", "--venv", tmp_path / "env",
                     "--index-url", "http://127.0.0.1:9/simple/", "--log", log)
    user_error(rc, err)
    assert "[E521]" in err
    assert not (tmp_path / "env").exists()


# -- the net under every command ----------------------------------------------------------------------


def test_an_os_error_inside_a_command_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.commands import schema

    def broken(args: object) -> int:
        raise PermissionError(13, "Permission denied", "/some/file")

    monkeypatch.setattr(schema, "run", broken)
    rc, _, err = run("schema")
    assert rc != 0
    assert "Permission denied (/some/file)" in err and "\n  next: " in err
