"""A system account is not personal data: `report --include-raw` keeps root, daemon, nobody and the
render/video groups (who owns a device node is what a replay needs), and still replaces a person's
account, also where that person's number is a system-looking one on macOS (501)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mlprobe.report.redact import Redactor

from .conftest import ROOT

ID_ROOT = "uid=0(root) gid=0(root) groups=0(root),44(video),109(render),65534(nogroup)\n"
LS_DEV = ("/dev/dri:\ntotal 0\ncrw-rw---- 1 root video  226,   0 Dec  6 07:55 card0\n"
          "crw-rw---- 1 root render 226, 128 Dec  6 07:55 renderD128\n"
          "crw-rw---- 1 daemon daemon 10, 1 Dec  6 07:55 x\n")


def _redact(captures: "dict[str, str]", env: "dict[str, str]") -> "dict[str, str]":
    r = Redactor()
    r.seed_live(env)
    for name, text in captures.items():
        r.learn(text, "json" if name.endswith(".json") else "text")
    return {name: r.redact_capture(name, text.encode()) for name, text in captures.items()}


def test_root_and_the_device_groups_stay() -> None:
    out = _redact({"id.txt": ID_ROOT, "ls-l-dev.txt": LS_DEV}, {"USER": "root", "LOGNAME": "root", "HOME": "/root"})
    assert out["id.txt"] == ID_ROOT
    assert out["ls-l-dev.txt"] == LS_DEV


def test_a_person_is_still_replaced_and_the_groups_stay() -> None:
    idt = "uid=1000(oturner) gid=1000(oturner) groups=1000(oturner),44(video),993(render),27(sudo)\n"
    ls = "crw-rw---- 1 oturner render 226, 128 Dec  6 07:55 renderD128\n"
    out = _redact({"id.txt": idt, "ls-l-dev.txt": ls}, {"USER": "oturner", "HOME": "/home/oturner"})
    assert "oturner" not in out["id.txt"] and "oturner" not in out["ls-l-dev.txt"]
    assert "44(video)" in out["id.txt"] and "993(render)" in out["id.txt"] and "27(sudo)" in out["id.txt"]
    assert out["ls-l-dev.txt"].startswith("crw-rw---- 1 <user-") and " render 226, 128" in out["ls-l-dev.txt"]


def test_a_mac_user_501_is_a_person_and_its_system_groups_stay() -> None:
    idt = "uid=501(ophelia) gid=20(staff) groups=20(staff),12(everyone),61(localaccounts),80(admin)\n"
    out = _redact({"id.txt": idt}, {"USER": "ophelia", "HOME": "/Users/ophelia"})["id.txt"]
    assert "ophelia" not in out and "20(staff)" in out and "80(admin)" in out and "12(everyone)" in out


def test_a_name_with_a_system_number_that_no_list_knows_stays() -> None:
    """A service account runs the scan and `id` says 123(ollama-svc): a number below 500 is a system
    one on every system, so the name stays, also where ls -l shows it."""
    idt = "uid=123(ollama-svc) gid=123(ollama-svc) groups=123(ollama-svc),44(video)\n"
    ls = "crw-rw---- 1 ollama-svc video 226, 0 Dec  6 07:55 card0\n"
    out = _redact({"id.txt": idt, "ls-l-dev.txt": ls}, {"USER": "ollama-svc", "HOME": "/usr/share/ollama"})
    assert out["id.txt"] == idt and out["ls-l-dev.txt"] == ls


def test_the_distribution_that_owns_a_loaded_library_is_no_user() -> None:
    doc = {"python": "/usr/bin/python3", "loads": [{"frameworks": ["numpy"], "libraries": [
        {"path": "/usr/lib/python3/site-packages/numpy.libs/libgfortran.so.5", "owner": "numpy"}]}],
        "owner": "ophelia"}
    out = json.loads(_redact({"loaded-libraries.json": json.dumps(doc)}, {"USER": "root"})["loaded-libraries.json"])
    lib = out["loads"][0]["libraries"][0]
    assert lib == {"path": "/usr/lib/python3/site-packages/numpy.libs/libgfortran.so.5", "owner": "numpy"}
    assert out["owner"] != "ophelia"


def test_report_of_this_machine_keeps_root(tmp_path: Path) -> None:
    """The live `report --include-raw` on this machine (its tests run as root, as containers do)."""
    import getpass

    import pytest

    if getpass.getuser() != "root":
        pytest.skip("this machine does not run the tests as root")
    out = tmp_path / "r.json"
    cp = subprocess.run([sys.executable, "-m", "mlprobe", "-q", "report", "--include-raw", "-o", str(out)],
                        capture_output=True, text=True, timeout=300, cwd=tmp_path,
                        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": "/root", "USER": "root"})
    assert cp.returncode == 0, cp.stderr
    files = json.loads(out.read_text())["capture_bundle"]["files"]
    assert files["id.txt"]["text"].startswith("uid=0(root) gid=0(root)")
    assert " root root " in files["ls-l-dev.txt"]["text"]
