"""The plan's "version:" line says what the command will install: the version when the command pins
it, else "the latest the index serves" (the newest row mlprobe knows named as that, not as a
promise). The pins file names where each pinned build came from, whatever the sources were."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from mlprobe.cli import main
from mlprobe.render.plan_terminal import version_said

from .conftest import FIXTURES, ROOT

P100 = FIXTURES / "linux-nvidia-tesla-p100-smi-xml"  # Pascal: torch pinned to the last release with sm_60


def _plan_lines(folder: Path) -> List[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["plan", "--replay", str(folder)])
    return out.getvalue().splitlines()


def _plan(folder: Path) -> Dict[str, Dict[str, object]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["plan", "--replay", str(folder), "--json"])
    return {e["recipe"]: e for e in json.loads(out.getvalue())["recommended"]}


def test_a_pinned_command_shows_its_version() -> None:
    recs = _plan(P100)
    assert recs["torch-cuda"]["packages"] == ["torch==2.7.*"]
    assert version_said(recs["torch-cuda"]) == "2.7"
    line = next(ln for ln in _plan_lines(P100) if "version: 2.7" in ln)
    assert "latest" not in line


def test_an_unpinned_command_does_not_claim_the_knowledges_version() -> None:
    recs = _plan(P100)
    assert recs["torch-cpu"]["packages"] == ["torch"] and recs["torch-cpu"]["version"] == "2.14"
    said = version_said(recs["torch-cpu"])
    assert said.startswith("the latest the index serves") and "not pinned" in said
    lines = _plan_lines(P100)
    head = next(i for i, ln in enumerate(lines) if re.search(r"\d\. torch-cpu ", ln))
    line = next(ln for ln in lines[head:] if "version:" in ln)
    assert "version: the latest the index serves (not pinned; mlprobe knows up to 2.14)" in line, line


def test_version_said_reads_the_pin_operators() -> None:
    for pkgs, pinned in ((["tensorflow[and-cuda]==2.14.*"], True), (["jax[cuda12]==0.12.0.1"], True),
                         (["torch~=2.7.0"], True), (["torch<=2.7"], True), (["torch"], False),
                         (["torch==2.71"], False), (["tensorflow"], False)):
        version = "2.7" if pkgs[0].startswith("torch") else "2.14" if "2.14" in pkgs[0] or pkgs == ["tensorflow"] \
            else "0.12.0.1"
        said = version_said({"version": version, "packages": pkgs})
        assert (said == version) is pinned, (pkgs, said)


def test_the_pins_file_names_the_folder_the_wheels_came_from(tmp_path: Path) -> None:
    """An offline install (--no-index --find-links DIR): every pin says `# from file:///DIR`."""
    from tests.pep503_server import build_wheel

    wheels = tmp_path / "my wheels"
    wheels.mkdir()
    build_wheel(wheels, "goodlib", "1.0")
    build_wheel(wheels, "labelled", "2.0+cpu")
    recipe = tmp_path / "r.json"
    recipe.write_text(json.dumps({"recipe": "demo", "title": "demo", "framework": "demo",
                                  "packages": ["goodlib", "labelled"]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLPROBE_")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    venv = tmp_path / "env"
    cp = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--recipe-file", str(recipe), "--no-index",
                         "--find-links", str(wheels), "--apply", "--venv", str(venv), "--no-verify"],
                        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    text = (venv / "mlprobe-pins.txt").read_text(encoding="utf-8")
    pins = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert pins and all(ln.endswith(f"# from {wheels.as_uri()}") for ln in pins), text
    from mlprobe.install.pin import parse_pins

    _recipe, _note, read = parse_pins(text)
    assert {p.name: p.index for p in read} == {"goodlib": wheels.as_uri(), "labelled": wheels.as_uri()}


def test_a_pin_from_pips_configuration_reads_back_whole() -> None:
    from mlprobe.install.pin import Pin, parse_pins, render_pins

    pins = [Pin("torch", "2.13.0+cpu", "pip's configuration"), Pin("goodlib", "1.0", None),
            Pin("x", "1", "https://download.pytorch.org/whl/cpu")]
    assert parse_pins(render_pins(pins, "torch-cpu", "created"))[2] == pins
