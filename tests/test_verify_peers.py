"""Several GPUs in one verify run: a GPU more than 20 % slower than the others of its model is named;
one GPU, different models, failed runs and the CPU are never compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from mlprobe.verify.peers import per_gpu_lines, slow_gpus
from mlprobe.verify.runner import summarise
from mlprobe.verify.schema import validate

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def rec(device: str, ips: Optional[float], name: str = "NVIDIA H100 80GB HBM3", kind: str = "cuda",
        framework: str = "torch", failure: Optional[Dict[str, Any]] = None,
        verdict: str = "ACCELERATED") -> Dict[str, Any]:
    return {"framework": framework, "device": device, "kind": kind, "name": name, "verdict": verdict,
            "speed": None if ips is None else {"images_per_s": ips}, "failure": failure}


def h100s(*speeds: Optional[float]) -> List[Dict[str, Any]]:
    return [rec("cpu", 900.0, name="CPU (16 threads)", kind="cpu")] + [
        rec(f"cuda:{i}", s) for i, s in enumerate(speeds)]


@pytest.mark.parametrize("speeds,slow", [
    ((40000, 41000, 39500, 40500), []),  # within noise
    ((40000, 41000, 30000, 40500), ["cuda:2"]),  # 26 % below the median of the others
    ((40000, 32500), []),  # 18.75 % slower: not more than 20 %
    ((40000, 31000), ["cuda:1"]),  # 22.5 % slower than its one peer
    ((40000, 10000, 10000, 40000), ["cuda:1", "cuda:2"]),  # two of four at a quarter of the others
    ((40000, 41000, 30000, 20000, 40500, 40200, 39900, 40100), ["cuda:2", "cuda:3"]),
    ((40000,), []),  # one GPU has no peers
])
def test_slow_gpus(speeds: tuple, slow: List[str]) -> None:
    assert [g.device for g in slow_gpus(h100s(*speeds))] == slow


def test_the_sentence_names_device_model_and_figures() -> None:
    (g,) = slow_gpus(h100s(40000, 41000, 30000, 40500))
    assert g.peers == ("cuda:0", "cuda:1", "cuda:3") and g.peer_median == 40500
    msg = g.sentence()
    assert msg.startswith("torch on cuda:2 (NVIDIA H100 80GB HBM3) is 26 % slower than its 3 peers")
    assert "30,000 images/s against a median of 40,500" in msg


def test_only_same_model_same_framework_with_a_speed_are_peers() -> None:
    mixed = [rec("cuda:0", 40000, name="NVIDIA GeForce RTX 4090"), rec("cuda:1", 15000, name="NVIDIA GeForce RTX 3060")]
    assert slow_gpus(mixed) == []
    failed = h100s(40000, 41000) + [rec("cuda:2", 100.0, failure={"ended": "crash"})]
    assert slow_gpus(failed) == []  # a crashed run's partial figure is not a speed
    (g,) = slow_gpus(h100s(40000, None, 20000))  # the one without a speed is no one's peer
    assert (g.device, g.peers) == ("cuda:2", ("cuda:0",))
    other_fw = h100s(40000) + [rec("/GPU:0", 20000, framework="tensorflow")]
    assert slow_gpus(other_fw) == []


def test_the_gpu_kinds_are_the_registry_gpu_backends() -> None:
    """Which device kinds are GPUs is the registry's `gpu` flag of a backend, not a list in verify/: the
    CPU, an NPU and PlaidML's generic OpenCL kind are never peers; a Mac Pro's two Radeons under PlaidML's
    Metal are."""
    from mlprobe.model.vocabulary import vocabulary
    from mlprobe.verify.peers import GPU_KINDS

    assert set(GPU_KINDS) == {b.id for b in vocabulary().backends if b.gpu}
    assert {"cuda", "rocm", "xpu", "directml", "mps"} <= set(GPU_KINDS)
    assert not {"cpu", "npu", "gpu", "opencl"} & set(GPU_KINDS)
    npus = [rec(f"npu:{i}", s, name="Ascend 910B", kind="npu") for i, s in enumerate((4000.0, 1000.0))]
    assert slow_gpus(npus) == []
    radeons = [rec(f"metal_amd_radeon_pro_w6800x.{i}", s, name="AMD Radeon Pro W6800X", kind="metal",
                   framework="plaidml") for i, s in enumerate((4000.0, 1000.0))]
    assert [g.device for g in slow_gpus(radeons)] == ["metal_amd_radeon_pro_w6800x.1"]


def test_per_gpu_lines_only_for_several_gpus() -> None:
    assert per_gpu_lines(h100s(40000)) == []
    assert per_gpu_lines(h100s(40000, 30000)) == [
        "torch cuda:0 (NVIDIA H100 80GB HBM3): ACCELERATED, 40,000 images/s",
        "torch cuda:1 (NVIDIA H100 80GB HBM3): ACCELERATED, 30,000 images/s"]


def test_real_single_gpu_result_is_unchanged_and_fits_the_schema() -> None:
    doc = json.loads((FIX / "verify-linux-nvidia-h200-torch-2.11-cu130" / "result.json").read_text())
    assert slow_gpus(doc["results"]) == []
    doc["slow_gpus"] = []
    assert summarise(doc) == doc["summary"]  # one GPU: the summary says what it said
    assert validate(doc) == []


def test_a_named_gpu_reaches_the_summary_and_fits_the_schema() -> None:
    doc = json.loads((FIX / "verify-linux-nvidia-h200-torch-2.11-cu130" / "result.json").read_text())
    gpu = next(r for r in doc["results"] if r["kind"] == "cuda")
    fast = dict(gpu, device="cuda:1", speed=dict(gpu["speed"], images_per_s=gpu["speed"]["images_per_s"] * 1.5))
    doc["results"].append(fast)
    doc["slow_gpus"] = [g.to_dict() for g in slow_gpus(doc["results"])]
    assert [g["device"] for g in doc["slow_gpus"]] == ["cuda:0"]
    assert any("cuda:0" in line and "33 % slower" in line for line in summarise(doc))
    assert validate(doc) == []
