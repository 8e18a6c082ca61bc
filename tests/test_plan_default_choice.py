"""When recipes of two frameworks tie on score, the framework already installed (and able to run) in
the target Python goes first, else torch; the plan says why (`ranking`), its "Best fit" line lists
the frameworks in the ranking's order, and `mlprobe install` with no flags proposes that first one."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from .conftest import FIXTURES, ROOT

NVIDIA_TIE = FIXTURES / "linux-nvidia-h100-smi"  # no list of installed packages: nothing installed
CPU_ONLY = FIXTURES / "linux-nogpu-xeon-gold-6230-avx512"


def _mlprobe(*args: str, env: Dict[str, str] | None = None) -> "subprocess.CompletedProcess[str]":
    import os

    e = {k: v for k, v in os.environ.items() if not k.startswith("MLPROBE_")}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "mlprobe", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=e)


def _bundle(tmp: Path, base: Path, installed: List[Dict[str, Any]]) -> Path:
    """A copy of a real capture with the target Python's installed distributions replaced (the
    capture's mlprobe-frameworks.json: what the frameworks probe reads)."""
    out = tmp / base.name
    shutil.copytree(base, out)
    for name in ("mlprobe-frameworks.json", "pip-list.txt"):
        (out / name).unlink(missing_ok=True)
    (out / "mlprobe-frameworks.json").write_text(json.dumps(installed))
    return out


def _plan(bundle: Path, *extra: str) -> Dict[str, Any]:
    r = _mlprobe("plan", "--replay", str(bundle), "--json", *extra)
    assert r.returncode == 0, r.stderr
    doc: Dict[str, Any] = json.loads(r.stdout)
    return doc


def _proposed(bundle: Path) -> str:
    r = _mlprobe("install", "--replay", str(bundle), "--json")
    assert r.returncode in (0, 3), r.stderr  # 3: the index check cannot reach the index offline
    return str(json.loads(r.stdout)["recipe"]["recipe"])


def test_nothing_installed_proposes_torch(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, NVIDIA_TIE, [])
    plan = _plan(bundle)
    scores = {e["recipe"]: e["score"] for e in plan["recommended"]}
    assert scores["torch-cuda"] == scores["tensorflow-cuda"], "the case needs a tie"
    assert plan["recommended"][0]["recipe"] == "torch-cuda"
    assert "torch (the default)" in plan["ranking"] and "tensorflow-cuda" in plan["ranking"]
    assert _proposed(bundle) == "torch-cuda"


def test_a_working_tensorflow_in_the_target_python_wins_the_tie(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, NVIDIA_TIE, [{"name": "tensorflow", "version": "2.21.0"}])
    plan = _plan(bundle)
    assert plan["recommended"][0]["recipe"] == "tensorflow-cuda"
    assert "tensorflow is already installed" in plan["ranking"]
    assert list(plan["top"])[0] == "tensorflow"
    assert _proposed(bundle) == "tensorflow-cuda"


def test_tensorflow_cpu_distribution_counts_as_tensorflow(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, CPU_ONLY, [{"name": "tensorflow-cpu", "version": "2.21.0"}])
    assert _plan(bundle)["recommended"][0]["recipe"] == "tensorflow-cpu"


def test_both_installed_torch_goes_first(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, CPU_ONLY, [{"name": "tensorflow", "version": "2.21.0"},
                                          {"name": "torch", "version": "2.13.0+cpu"}])
    plan = _plan(bundle)
    assert plan["recommended"][0]["recipe"] == "torch-cpu"
    assert "torch is already installed" in plan["ranking"]


def test_a_tensorflow_that_cannot_start_on_this_cpu_wins_nothing() -> None:
    from mlprobe.plan.planner import working_frameworks
    from mlprobe.plan.rules import Verdict
    from mlprobe.model.facts import FrameworkFacts

    installed = {"tensorflow": FrameworkFacts(name="tensorflow", version="2.21.0"),
                 "torch": FrameworkFacts(name="torch", version="2.13.0")}
    refused = Verdict(recipe="tensorflow-cpu", fits=False, reasons=["the CPU has no AVX"], warnings=[])
    assert working_frameworks(installed, {"tensorflow-cpu": refused}) == ("torch",)
    assert set(working_frameworks(installed, {})) == {"torch", "tensorflow"}


def test_framework_filter_keeps_the_tie_break(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, NVIDIA_TIE, [{"name": "tensorflow", "version": "2.21.0"}])
    plan = _plan(bundle, "--framework", "torch")
    assert plan["recommended"][0]["recipe"] == "torch-cuda" and list(plan["top"]) == ["torch"]


H_CAPTURES = sorted(p for p in FIXTURES.iterdir()
                    if p.is_dir() and re.match(r"linux-nvidia-h(100|200)-", p.name)
                    and any(p.glob("nvidia-smi*")))


@pytest.mark.parametrize("folder", H_CAPTURES, ids=[p.name for p in H_CAPTURES])
def test_h100_and_h200_captures_propose_torch_cuda(folder: Path) -> None:
    plan = _plan(folder)
    assert plan["recommended"][0]["recipe"] == "torch-cuda", plan["ranking"]


@pytest.mark.parametrize("folder", [NVIDIA_TIE, CPU_ONLY, FIXTURES / "linux-nogpu-amd-opteron-8354-no-avx",
                                    FIXTURES / "linux-nvidia-h200-mlprobe-capture"],
                         ids=lambda p: p.name)
def test_first_recommendation_is_first_of_best_fit(folder: Path) -> None:
    r = _mlprobe("plan", "--replay", str(folder), env={"COLUMNS": "400"})
    assert r.returncode == 0, r.stderr
    best = next(ln for ln in r.stdout.splitlines() if ln.startswith("Best fit:"))
    first_fit = re.match(r"Best fit: (\S+) -> (\S+?);", best)
    first_rec = re.search(r"^\W*1\. (\S+)", r.stdout, re.M)
    assert first_fit and first_rec, r.stdout
    assert first_fit.group(2) == first_rec.group(1)
    assert any(ln.startswith("Ranking: " + first_rec.group(1) + " first") for ln in r.stdout.splitlines())
    # the frameworks of "Best fit" in the order of the numbered list
    order = [m.group(2) for m in re.finditer(r"(\S+) -> (\S+?)(?:;|$)", best.split(":", 1)[1])]
    ranked = re.findall(r"^\W*\d+\. (\S+)", r.stdout, re.M)
    assert [x for x in order if x in ranked] == sorted([x for x in order if x in ranked], key=ranked.index)


def _enumeration(bundle: Path, frameworks: List[Dict[str, Any]]) -> None:
    """framework-devices.json as mlprobe's enumeration writes it (the fields the planner reads)."""
    (bundle / "framework-devices.json").write_text(json.dumps(
        {"python": "/usr/bin/python3", "python_version": "3.12", "method": "child per framework",
         "frameworks": frameworks}))


def test_a_tensorflow_whose_import_failed_wins_no_tie(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, NVIDIA_TIE, [{"name": "tensorflow", "version": "2.21.0"}])
    _enumeration(bundle, [{"name": "tensorflow", "version": "2.21.0", "devices": [], "unavailable": [],
                           "error": "ImportError: libcudart.so.12: cannot open shared object file", "seconds": 1.0}])
    plan = _plan(bundle)
    assert plan["recommended"][0]["recipe"] == "torch-cuda"
    assert "tensorflow: its import failed there" in plan["ranking"]
    assert _proposed(bundle) == "torch-cuda"


def test_a_tensorflow_that_enumerates_still_wins(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, NVIDIA_TIE, [{"name": "tensorflow", "version": "2.21.0"}])
    _enumeration(bundle, [{"name": "tensorflow", "version": "2.21.0", "error": None, "seconds": 2.0,
                           "devices": [{"id": "/GPU:0", "kind": "gpu", "name": "NVIDIA H100"}], "unavailable": []}])
    assert _plan(bundle)["recommended"][0]["recipe"] == "tensorflow-cuda"


def test_the_crashed_enumeration_fixture_says_torch_failed() -> None:
    plan = _plan(FIXTURES / "synthetic-linux-nvidia-h200-enumeration-crashed")
    assert plan["recommended"][0]["recipe"] == "torch-cuda" and "torch: its import failed there" in plan["ranking"]
