"""PlaidML end to end with one command, as a new user runs it: `mlprobe install --recipe
plaidml-keras --apply --venv DIR` (the recipe's own index, the compatibility shim, KERAS_BACKEND in
the activate scripts, the import check in the activated environment), then `mlprobe verify
--framework plaidml --python DIR/bin/python` without activating: PlaidML's LLVM CPU device,
correct, learns, verdict CPU."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.registry,
              pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                 reason="PlaidML 0.7.0 publishes x86_64 wheels only")]


def test_plaidml_installs_and_verifies_on_llvm_cpu(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("KERAS_BACKEND", None)
    venv = tmp_path / "plaidml"
    r = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--recipe", "plaidml-keras", "--apply",
                        "--no-verify", "--venv", str(venv), "--json"], capture_output=True, text=True,
                       timeout=1200, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["result"]["import_ok"] is True
    assert doc["recipe"]["sources"]["origin"] == "default index"
    assert "KERAS_BACKEND" in (venv / "bin" / "activate").read_text()
    # started as an IDE, cron or `uv run` start it: no activate, almost no environment
    plain = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", str(venv / "bin" / "python"), "-c",
                            "import os; print(os.environ['KERAS_BACKEND'])"], capture_output=True, text=True,
                           timeout=60)
    assert plain.stdout.strip() == "plaidml.keras.backend", plain.stderr
    mine = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "KERAS_BACKEND=tensorflow", str(venv / "bin" / "python"),
                           "-c", "import os; print(os.environ['KERAS_BACKEND'])"], capture_output=True, text=True,
                          timeout=60)
    assert mine.stdout.strip() == "tensorflow", mine.stderr  # the user's value wins
    v = subprocess.run([sys.executable, "-m", "mlprobe", "verify", "--framework", "plaidml", "--python",
                        str(venv / "bin" / "python"), "--json", "--quick", "--no-cpu-peers"],
                       capture_output=True, text=True, timeout=1200, env=env, cwd=tmp_path)
    assert v.returncode == 0, v.stderr[-3000:]
    res = json.loads(v.stdout)
    assert res["request"]["env"]["KERAS_BACKEND"] == "plaidml.keras.backend"  # set by the start-up hook
    cpu = [x for x in res["results"] if x["framework"] == "plaidml" and x["device"] == "llvm_cpu.0"]
    assert cpu, res["results"]
    rec = cpu[0]
    assert rec["verdict"] == "CPU" and rec["correctness"]["passed"] and rec["learning"]["passed"], rec
    assert not any("sees no" in (x.get("reason") or "") for x in res["results"])
    # A device PlaidML does not have, asked for by PLAIDML_DEVICE_IDS in the activated environment:
    # NOT_SEEN with what PlaidML lists, and verify exits 1 (llvm_cpu.0 is still measured, as CPU).
    active = dict(env, VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                  KERAS_BACKEND="plaidml.keras.backend", PLAIDML_DEVICE_IDS="opencl_nvidia_nvidia_h200.0")
    n = subprocess.run([sys.executable, "-m", "mlprobe", "verify", "--framework", "plaidml", "--python",
                        str(venv / "bin" / "python"), "--json", "--quick", "--no-cpu-peers"],
                       capture_output=True, text=True, timeout=1200, env=active, cwd=tmp_path)
    assert n.returncode == 1, n.stderr[-3000:]
    res = json.loads(n.stdout)
    seen = [x for x in res["results"] if x["verdict"] == "NOT_SEEN"]
    assert len(seen) == 1, res["results"]
    assert seen[0]["device"] == "opencl_nvidia_nvidia_h200.0" and seen[0]["requested_by"] == "PLAIDML_DEVICE_IDS"
    assert "llvm_cpu.0" in seen[0]["listed_devices"] and seen[0]["likely_cause"]
    assert any(x["device"] == "llvm_cpu.0" and x["verdict"] == "CPU" for x in res["results"])
