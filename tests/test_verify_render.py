"""Verify result fixtures (real runs, fixtures/verify-*/result.json): they keep their shape, their
verdicts follow from their own measurements, and the terminal renderer shows what a user needs."""

from __future__ import annotations

import io
import re
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from mlprobe.render.verify_terminal import Progress, render_verify
from mlprobe.verify import verdict as V
from mlprobe.verify.schema import validate

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RESULTS = sorted(FIXTURES.glob("verify-*/result.json"))


def load(p: Path) -> Dict[str, Any]:
    return json.loads(p.read_text(encoding="utf-8"))


def test_there_are_verify_fixtures() -> None:
    assert len(RESULTS) >= 2


@pytest.mark.parametrize("path", RESULTS, ids=[p.parent.name for p in RESULTS])
def test_fixture_fits_the_schema_and_its_verdicts_follow_from_its_figures(path: Path) -> None:
    doc = load(path)
    assert validate(doc) == []
    fw_cpu: Dict[str, Dict[str, Any]] = {}
    for r in doc["results"]:
        if r["kind"] == "cpu" and r["verdict"] == V.CPU:
            fw_cpu.setdefault(r["framework"], {"images_per_s": r["speed"]["images_per_s"]})
    for r in doc["results"]:
        if r["correctness"] is None and r["verdict"] == V.UNAVAILABLE:
            continue
        # the stored reasons are in the words of the mlprobe that made them; the verdict must follow
        verdict, reason = V.decide(r, fw_cpu.get(r["framework"]), doc["best_cpu"])
        assert verdict == r["verdict"], (r["device"], reason)


@pytest.mark.parametrize("path", RESULTS, ids=[p.parent.name for p in RESULTS])
def test_renders_verdicts_figures_and_the_tolerances(path: Path) -> None:
    doc = load(path)
    buf = io.StringIO()
    render_verify(doc, stream=buf)
    text = buf.getvalue()
    for r in doc["results"]:
        assert r["verdict"] in text
        if r["speed"] and r["speed"].get("images_per_s"):
            assert V.fmt_ips(r["speed"]["images_per_s"]) in text
    assert "float64 CPU reference" in text and "batch 128" in text


def test_plaidml_fixture_is_honest_about_the_cpu() -> None:
    docs = [load(p) for p in RESULTS if "plaidml" in p.parent.name]
    if not docs:
        pytest.skip("no PlaidML fixture")
    r = next(r for r in docs[0]["results"] if r["device"] == "llvm_cpu.0")
    assert r["kind"] == "cpu" and r["verdict"] == V.CPU
    assert "not on a GPU" in r["reason"]


def test_render_of_a_slower_accelerator_and_a_failure() -> None:
    doc: Dict[str, Any] = {
        "python": {"executable": "/venv/bin/python", "version": "3.11.7"}, "wall_s": 12.0,
        "tolerances": {"loss_rtol": 0.005, "grad_rtol": 0.02, "learn_target": 0.9, "accelerated_at": 1.5,
                       "speed_batch": 128},
        "frameworks": [{"name": "plaidml", "unavailable_devices": [{"id": "opencl_x.1", "reason": "unsupported"}]}],
        "results": [
            {"framework": "plaidml", "framework_version": "0.7.0", "device": "opencl_amd_kaveri.0", "kind": "gpu",
             "name": "Kaveri", "verdict": V.SLOWER_THAN_CPU, "reason": "plaidml opencl_amd_kaveri.0 is SLOWER than the CPU",
             "correctness": {"passed": True}, "learning": {"passed": True, "accuracy": 0.95, "seconds": 3.0},
             "speed": {"images_per_s": 41.0}, "speedup_vs_framework_cpu": 0.2, "proof": {}},
            {"framework": "torch", "framework_version": "2.13.0", "device": "cuda:0", "kind": "cuda", "name": None,
             "verdict": V.UNAVAILABLE, "reason": "torch cuda:0: the torch process crashed (SIGSEGV)",
             "correctness": None, "learning": None, "speed": None, "proof": None},
        ],
        "summary": ["plaidml opencl_amd_kaveri.0 is SLOWER than the CPU", "torch cuda:0: crashed (SIGSEGV)"],
    }
    buf = io.StringIO()
    render_verify(doc, stream=buf)
    text = buf.getvalue()
    assert "SLOWER_THAN_CPU" in text and "0.20x" in text and "UNAVAILABLE" in text
    assert "SIGSEGV" in text and "opencl_x.1: unsupported" in text


def test_progress_without_a_terminal_is_silent_unless_verbose() -> None:
    buf = io.StringIO()
    p = Progress(stream=buf)
    p.event({"event": "result", "framework": "torch", "device": "cpu", "stage": "speed",
             "data": {"images_per_s": 1600.0}})
    p.stop()
    assert buf.getvalue() == ""


def test_progress_without_a_terminal_prints_one_line_per_finished_stage_when_verbose(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe import ui

    monkeypatch.setattr(ui, "_level", ui.VERBOSE)
    buf = io.StringIO()
    p = Progress(stream=buf)
    events: List[Dict[str, Any]] = [
        {"event": "hello", "framework": "torch", "version": "2.13.0", "import_s": 1.5},
        {"event": "stage", "framework": "torch", "device": "cpu", "stage": "speed"},
        {"event": "result", "framework": "torch", "device": "cpu", "stage": "speed", "data": {"images_per_s": 1600.0}},
        {"event": "result", "framework": "torch", "device": "cpu", "stage": "learning",
         "data": {"passed": False, "accuracy": 0.2, "steps": 300, "seconds": 9.0}},
    ]
    for ev in events:
        p.event(ev)
    p.stop()
    lines = [re.sub(r"^verify \+\d+\.\d s: ", "verify: ", line) for line in buf.getvalue().splitlines()]
    assert lines == ["verify: torch 2.13.0 imported in 1.5 s",
                     "verify: torch cpu: speed 1,600 images/s",
                     "verify: torch cpu: learning FAILED: 20% in 300 steps, 9.00 s"]
    assert all(re.match(r"verify \+\d+\.\d s: ", line) for line in buf.getvalue().splitlines())


def test_a_learning_stage_paused_by_another_childs_timing_shows_its_own_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe import ui

    monkeypatch.setattr(ui, "_level", ui.VERBOSE)
    buf = io.StringIO()
    p = Progress(stream=buf)
    p.event({"event": "result", "framework": "torch", "device": "cpu", "stage": "learning",
             "data": {"passed": True, "accuracy": 0.92, "steps": 60, "seconds": 1.45, "paused_s": 1.3}})
    p.stop()
    assert buf.getvalue().split(": ", 1)[1].strip() == (
        "torch cpu: learning ok: 92% in 60 steps, 0.15 s (and 1.3 s paused while another child timed)")


def test_h200_fixture_shows_cuda_accelerated_with_its_proof() -> None:
    docs = [load(p) for p in RESULTS if "h200" in p.parent.name]
    if not docs:
        pytest.skip("no H200 fixture")
    r = next(r for r in docs[0]["results"] if r["device"] == "cuda:0")
    assert r["verdict"] == V.ACCELERATED and r["speedup_vs_framework_cpu"] >= 1.5
    assert r["proof"]["tensor_device"] == "cuda:0" and r["proof"]["max_memory_allocated_bytes"] > 0
    assert r["proof"]["device_name"] == "NVIDIA H200"
    assert r["correctness"]["passed"] and r["correctness"]["grad_rel_err"] < r["correctness"]["grad_rtol"]
