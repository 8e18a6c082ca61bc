"""`mlprobe capture DIR` writes the scanning Python's package list (pip-list.txt), so that the
documented `bundle --replay DIR --reuse-installed` works on a capture folder (no E546)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mlprobe.commands.bundle import parse_installed

from .conftest import ROOT


def _env(tmp: Path) -> dict:  # type: ignore[type-arg]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLPROBE_")}
    env.update(XDG_CACHE_HOME=str(tmp / "cache"), PYTHONPATH=str(ROOT))
    return env


def test_capture_writes_pip_list_and_bundle_reuse_installed_reads_it(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cp = subprocess.run([sys.executable, "-m", "mlprobe", "capture", str(cap)], capture_output=True, text=True,
                        timeout=300, env=_env(tmp_path), cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    listed = parse_installed((cap / "pip-list.txt").read_text(encoding="utf-8"))
    import importlib.metadata as md

    here = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in md.distributions()}
    assert listed.get("torch") == here["torch"] and listed.get("packaging") == here["packaging"]

    from tests.pep503_server import build_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    # a stand-in TensorFlow (not installed here) that needs packaging, which this machine has: the
    # resolver sees packaging's wheel, the bundle leaves it out
    build_wheel(wheels, "tensorflow", "2.21.0", requires=["packaging"])
    build_wheel(wheels, "packaging", here["packaging"])
    cp = subprocess.run([sys.executable, "-m", "mlprobe", "bundle", "--replay", str(cap), "--recipe", "tensorflow-cpu",
                         "-o", str(tmp_path / "out"), "--no-index", "--find-links", str(wheels), "--reuse-installed",
                         "--json"], capture_output=True, text=True, timeout=300, env=_env(tmp_path), cwd=tmp_path)
    assert cp.returncode == 0 and "E546" not in cp.stderr, cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["provided_by_target"] == [f"packaging=={here['packaging']}"], doc
    assert [f["name"] for f in doc["files"]] == ["tensorflow"]


def test_without_pip_the_list_comes_from_the_dist_info_folders() -> None:
    from mlprobe.scan.live.frameworks import installed_distributions

    names = {n.lower() for n, _v in installed_distributions()}
    assert {"packaging", "torch", "rich"} <= names
    text = "# note\n" + "\n".join(f"{n}=={v}" for n, v in installed_distributions()) + "\n"
    assert parse_installed(text)["packaging"]
