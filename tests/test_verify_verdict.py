"""Verdicts from measurements (pure): thresholds, plain words for a slower accelerator, NaN and
mismatches as WRONG_RESULTS, crashes as UNAVAILABLE, and honesty about CPU 'devices'."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from mlprobe.errors import EXIT_FAILURE, EXIT_OK, EXIT_UNAVAILABLE
from mlprobe.verify import verdict as V
from mlprobe.verify.runner import exit_code, summarise


def rec(kind: str = "cuda", ips: Optional[float] = 1000.0, framework: str = "torch", device: str = "cuda:0",
        **over: Any) -> Dict[str, Any]:
    r: Dict[str, Any] = {
        "framework": framework, "device": device, "kind": kind, "failure": None,
        "correctness": {"passed": True, "nan": False, "loss_rel_err": 1e-6, "grad_rel_err": 1e-5,
                        "loss_rtol": 5e-3, "grad_rtol": 2e-2},
        "learning": {"passed": True, "nan": False, "accuracy": 0.93, "target": 0.9, "steps": 60, "seconds": 0.4},
        "speed": {"images_per_s": ips, "seconds_per_epoch": 60000 / ips if ips else None, "nan": False},
    }
    r.update(over)
    return r


CPU = {"framework": "torch", "images_per_s": 100.0}


@pytest.mark.parametrize("ips,expected", [
    (2000.0, V.ACCELERATED), (150.0, V.ACCELERATED), (149.0, V.MARGINAL), (100.0, V.MARGINAL),
    (99.0, V.SLOWER_THAN_CPU), (20.0, V.SLOWER_THAN_CPU),
])
def test_speed_thresholds(ips: float, expected: str) -> None:
    assert V.decide(rec(ips=ips), CPU, CPU)[0] == expected


def test_slower_accelerator_is_said_plainly() -> None:
    v, reason = V.decide(rec(kind="gpu", framework="plaidml", device="opencl_amd_kaveri.0", ips=20.0),
                         {"images_per_s": 100.0}, {"framework": "torch", "images_per_s": 500.0})
    assert v == V.SLOWER_THAN_CPU
    assert "SLOWER than the best CPU figure (torch on this CPU, 500 images/s)" in reason
    assert "25.0x faster" in reason and "use torch on the CPU" in reason
    assert "0.20x plaidml on the CPU (100 images/s)" in reason


def test_a_gpu_that_beats_its_own_cpu_path_but_not_the_best_cpu_is_slower_than_cpu() -> None:
    # 25x PlaidML's own llvm_cpu.0, but 0.15x TensorFlow on the same CPU: not ACCELERATED.
    v, reason = V.decide(rec(kind="gpu", framework="plaidml", ips=300.0), {"images_per_s": 12.0},
                         {"framework": "tensorflow", "images_per_s": 2000.0})
    assert v == V.SLOWER_THAN_CPU
    assert "best CPU figure (tensorflow on this CPU, 2,000 images/s)" in reason and "25.0x plaidml on the CPU" in reason


def test_the_headline_ratio_is_to_the_best_cpu_and_the_own_cpu_ratio_follows() -> None:
    # figures of the H200 run in the PlaidML issue: GPU 12,042, llvm_cpu.0 100, torch CPU 3,719
    v, reason = V.decide(rec(kind="gpu", framework="plaidml", device="opencl_nvidia_nvidia_h200.0", ips=12042.0),
                         {"images_per_s": 100.0}, {"framework": "torch", "images_per_s": 3719.0})
    assert v == V.ACCELERATED
    assert reason.startswith("plaidml opencl_nvidia_nvidia_h200.0 is 3.2x the best CPU figure (torch on this CPU")
    assert "120.4x plaidml on the CPU" in reason


def test_margin_is_against_the_best_cpu() -> None:
    v, _ = V.decide(rec(kind="gpu", framework="plaidml", ips=3000.0), {"images_per_s": 100.0},
                    {"framework": "torch", "images_per_s": 2500.0})
    assert v == V.MARGINAL


def test_h200_like_figures() -> None:
    v, reason = V.decide(rec(ips=60000.0), {"images_per_s": 3000.0}, {"framework": "torch", "images_per_s": 3000.0})
    assert v == V.ACCELERATED and "20.0x the best CPU figure (torch on this CPU, 3,000 images/s)" in reason


def test_cpu_device_is_never_accelerated_and_names_the_faster_cpu_path() -> None:
    r = rec(kind="cpu", framework="plaidml", device="llvm_cpu.0", ips=12.0,
            cpu_note="PlaidML's llvm_cpu.0 is its LLVM CPU device: it runs on the CPU, not on a GPU")
    v, reason = V.decide(r, {"images_per_s": 12.0}, {"framework": "torch", "images_per_s": 1600.0})
    assert v == V.CPU
    assert "not on a GPU" in reason and "torch on this CPU reaches 1,600" in reason


@pytest.mark.parametrize("stage", ["correctness", "learning", "speed"])
def test_nan_anywhere_is_wrong_results(stage: str) -> None:
    r = rec()
    r[stage] = dict(r[stage], nan=True, passed=False)
    v, reason = V.decide(r, CPU, CPU)
    assert v == V.WRONG_RESULTS and "NaN" in reason


def test_mismatch_names_the_tolerance() -> None:
    r = rec()
    r["correctness"] = dict(r["correctness"], passed=False, grad_rel_err=0.4)
    v, reason = V.decide(r, CPU, CPU)
    assert v == V.WRONG_RESULTS and "gradients differ by 0.4" in reason and "tolerance 0.02" in reason


def test_not_learning_is_wrong_results() -> None:
    r = rec()
    r["learning"] = dict(r["learning"], passed=False, accuracy=0.11, steps=300)
    v, reason = V.decide(r, CPU, CPU)
    assert v == V.WRONG_RESULTS and "did not learn" in reason and "11%" in reason


def test_crash_and_stage_error_are_unavailable() -> None:
    r = rec(failure={"message": "the torch process crashed (SIGSEGV) during the speed test on cuda:0"})
    assert V.decide(r, CPU, CPU) == (V.UNAVAILABLE, "torch cuda:0: the torch process crashed (SIGSEGV) "
                                                     "during the speed test on cuda:0")
    r = rec()
    r["speed"] = {"error": "RuntimeError: CUDA error: no kernel image is available for execution on the device"}
    v, reason = V.decide(r, CPU, CPU)
    assert v == V.UNAVAILABLE and "no kernel image" in reason


def test_no_baseline_falls_back_to_best_cpu_then_says_so() -> None:
    assert V.decide(rec(ips=500.0), None, {"framework": "tensorflow", "images_per_s": 100.0})[0] == V.ACCELERATED
    assert V.decide(rec(ips=500.0), None, None)[0] == V.NO_BASELINE


def doc(*verdicts: str, device: Optional[str] = None) -> Dict[str, Any]:
    results = [dict(rec(), verdict=v, reason=v.lower(), device=f"cuda:{i}") for i, v in enumerate(verdicts)]
    return {"results": results, "frameworks": [], "request": {"device": device}, "best_cpu": None,
            "python": {"executable": "python"}}


def test_exit_codes() -> None:
    assert exit_code(doc(V.CPU, V.ACCELERATED)) == EXIT_OK
    assert exit_code(doc(V.CPU, V.SLOWER_THAN_CPU)) == EXIT_OK  # a finding, not a failure
    assert exit_code(doc(V.CPU, V.WRONG_RESULTS)) == EXIT_FAILURE
    assert exit_code(doc(V.UNAVAILABLE)) == EXIT_UNAVAILABLE
    assert exit_code(doc()) == EXIT_UNAVAILABLE
    assert exit_code(doc(V.CPU, V.UNAVAILABLE, device="cuda:1")) == EXIT_UNAVAILABLE
    assert exit_code(doc(V.CPU, V.ACCELERATED, device="cuda:1")) == EXIT_OK


def test_summary_mentions_nothing_installed() -> None:
    assert "nothing to verify" in summarise(doc())[-1]


def test_a_damaged_stage_record_is_read_not_a_traceback() -> None:
    """The stage records come from another interpreter: a null tolerance, a string figure, a failure
    that is no object are read as unknown (the verdict still comes), never a TypeError."""
    r = rec(correctness={"passed": False, "loss_rel_err": 0.5, "loss_rtol": None, "grad_rel_err": "x"})
    v, reason = V.decide(r, CPU, CPU)
    assert v == V.WRONG_RESULTS and "loss differs from the CPU reference by 0.5 (tolerance 0)" in reason
    assert V.decide(rec(failure="the process crashed"), CPU, CPU) == (V.UNAVAILABLE, "torch cuda:0: the process crashed")
    m = V.Measured.of(rec(ips=2000.0))
    assert V.judge(m, V.CpuBaseline(100.0, "torch"), V.CpuBaseline(100.0, "torch")) == V.decide(rec(ips=2000.0), CPU, CPU)
