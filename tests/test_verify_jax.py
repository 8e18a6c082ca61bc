"""The JAX part of the verify payload, run for real on this machine's CPU (jax from the test extra):
the CNN's loss and gradients against the float64 CPU reference, the learning task, a speed figure."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any, Dict, List

import pytest

from mlprobe.verify.child import PAYLOAD

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed (test extra)"),
]


def _events(*args: str) -> List[Dict[str, Any]]:
    out = subprocess.run([sys.executable, str(PAYLOAD), *args], capture_output=True, text=True, timeout=300)
    mark = "@@mlprobe-verify@@ "
    return [json.loads(line[len(mark):]) for line in out.stdout.splitlines() if line.startswith(mark)]


def test_discover_reports_jax() -> None:
    (ev,) = [e for e in _events("discover") if e["event"] == "discover"]
    from importlib.metadata import version

    assert ev["frameworks"]["jax"] == {"importable": True, "version": version("jax")}


def test_jax_trains_the_cnn_on_the_cpu_correctly_and_measures_speed() -> None:
    events = _events("run", json.dumps({"framework": "jax", "quick": True, "devices": ["cpu"]}))
    assert not [e for e in events if e["event"] == "fatal"], events
    hello = next(e for e in events if e["event"] == "hello")
    assert hello["framework"] == "jax" and hello["info"]["default_backend"] == "cpu"
    results = {e["stage"]: e["data"] for e in events if e["event"] == "result" and e["device"] == "cpu"}
    assert results["correctness"]["passed"], results["correctness"]
    assert results["correctness"]["grad_rel_err"] < 1e-4  # float32 on the CPU vs the float64 reference
    assert results["learning"]["passed"] and results["learning"]["accuracy"] >= 0.9
    assert results["speed"]["images_per_s"] > 0 and not results["speed"]["nan"]
    done = next(e for e in events if e["event"] == "device_done")
    assert done["data"]["proof"]["tensor_device"].startswith("cpu") or "Cpu" in done["data"]["proof"]["tensor_device"]


def test_a_nan_on_the_device_fails_the_correctness_check() -> None:
    cfg = {"framework": "jax", "quick": True, "devices": ["cpu"],
           "inject": {"device": "cpu", "stage": "correctness", "fault": "nan"}}
    events = _events("run", json.dumps(cfg))
    corr = next(e["data"] for e in events if e["event"] == "result" and e["stage"] == "correctness")
    assert corr["nan"] and not corr["passed"]


def test_a_cpu_only_child_starts_no_gpu_backend_and_lists_only_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # a CPU peer or the CPU half of a split run: even where JAX_PLATFORMS would allow a GPU backend,
    # the child keeps to the CPU (a GPU backend would reserve most of the GPU's memory) and leaves the
    # accelerators' reasons to the other child
    monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")
    events = _events("run", json.dumps({"framework": "jax", "cpu_only": True, "enumerate_only": True}))
    assert not [e for e in events if e["event"] == "fatal"], events
    hello = next(e for e in events if e["event"] == "hello")
    assert hello["info"]["default_backend"] == "cpu"
    devices = next(e for e in events if e["event"] == "devices")
    assert [d["id"] for d in devices["devices"]] == ["cpu"] and devices["unavailable"] == []
    code = ("import sys\nfrom mlprobe.verify.payload import jax as J, _harness as H\nH._proto = sys.stderr\n"
            "J.Backend(dict(H.DEFAULTS, cpu_only=True))\nimport jax\nprint(jax.config.jax_platforms)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "cpu", out.stderr[-1500:]
