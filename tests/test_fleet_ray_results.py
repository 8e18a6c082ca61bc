"""One node's odd answer costs that node, not the fleet scan: a result that is not a report (a string,
a list, a report without a scan), one with numbers no document holds (10**400, NaN), or one whose
summary fails is that node's `error`; the other nodes are kept. Ray itself is stood in for by a small
fake here (the real cluster tests are tests/test_fleet_ray.py): what is tested is how scan_cluster
takes the answers ray.get returns."""

from __future__ import annotations

import json
import sys
import types
from typing import Any, Dict, List, Tuple

import pytest

from mlprobe.fleet.ray_scan import scan_cluster

from .fleet_gen import template_reports


def fake_ray(monkeypatch: pytest.MonkeyPatch, answers: Dict[str, Any]) -> None:
    ray = types.ModuleType("ray")
    nodes = [{"NodeID": nid, "Alive": True, "NodeManagerAddress": f"10.0.0.{i}", "NodeManagerPort": 1}
             for i, nid in enumerate(answers)]

    class Strategy:
        def __init__(self, node_id: str, soft: bool) -> None:
            self.node_id = node_id

    class Remote:
        def __init__(self, fn: Any) -> None:
            self.fn = fn

        def options(self, scheduling_strategy: Strategy, **_kw: Any) -> Any:
            nid = scheduling_strategy.node_id
            return types.SimpleNamespace(remote=lambda *_a: nid)

    def wait(refs: List[str], num_returns: int = 1, timeout: float = 0) -> Tuple[List[str], List[str]]:
        return refs[:num_returns], refs[num_returns:]

    def get(ref: str) -> Any:
        v = answers[ref]
        if isinstance(v, BaseException):
            raise v
        return v

    ray.init = lambda **_kw: None  # type: ignore[attr-defined]
    ray.nodes = lambda: nodes  # type: ignore[attr-defined]
    ray.remote = Remote  # type: ignore[attr-defined]
    ray.wait = wait  # type: ignore[attr-defined]
    ray.get = get  # type: ignore[attr-defined]
    ray.shutdown = lambda: None  # type: ignore[attr-defined]
    ray.cancel = lambda *_a, **_k: None  # type: ignore[attr-defined]
    ray.kill = lambda *_a, **_k: None  # type: ignore[attr-defined]
    util = types.ModuleType("ray.util")
    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.NodeAffinitySchedulingStrategy = Strategy  # type: ignore[attr-defined]
    exceptions = types.ModuleType("ray.exceptions")
    ray.util = util  # type: ignore[attr-defined]
    ray.exceptions = exceptions  # type: ignore[attr-defined]
    for name, mod in (("ray", ray), ("ray.util", util), ("ray.util.scheduling_strategies", strategies),
                      ("ray.exceptions", exceptions)):
        monkeypatch.setitem(sys.modules, name, mod)


def test_odd_answers_cost_only_their_node(monkeypatch: pytest.MonkeyPatch) -> None:
    good = template_reports()[0]
    huge = json.loads(json.dumps(good))
    huge["scan"]["gpus"][0]["memory_bytes"] = 10 ** 400
    nan = json.loads(json.dumps(good))
    nan["verify"]["results"][0]["speed"]["images_per_s"] = float("nan")
    wrong = json.loads(json.dumps(good))
    wrong["scan"]["gpus"] = {"not": "a list"}
    tuple_key = json.loads(json.dumps(good))
    tuple_key["scan"]["runtimes"][("a", "tuple")] = "key"  # a Python value, not JSON: fleet_json failed on it
    a_set = json.loads(json.dumps(good))
    a_set["scan"]["cpu"]["flags"] = {"avx", "avx2"}
    answers: Dict[str, Any] = {
        "n-good": {"report": good, "seconds": 1.0},
        "n-string": "a string, not a result",
        "n-list": [1, 2, 3],
        "n-no-report": {"seconds": 1.0},
        "n-report-string": {"report": "nope"},
        "n-huge": {"report": huge, "seconds": 1.0},
        "n-nan": {"report": nan, "seconds": float("inf")},
        "n-wrong-type": {"report": wrong},
        "n-tuple-key": {"report": tuple_key},
        "n-set": {"report": a_set},
        "n-deep": {"report": {"scan": {"cpu": {"model": "x"}}, "x": [[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]}},
    }
    fake_ray(monkeypatch, answers)
    events: List[Tuple[str, str]] = []
    doc = scan_cluster("ray://fake:10001", 10.0, on_event=lambda n, s, _t, _d: events.append((n, s)))
    status = {n["ray_node_id"]: n["status"] for n in doc["nodes"]}
    assert status.pop("n-good") == "ok"
    assert status.pop("n-deep") == "ok"  # deep, but nothing wrong in it
    assert set(status.values()) == {"error"}, status
    errors = {n["ray_node_id"]: n["error"] for n in doc["nodes"]}
    assert "not a report" in errors["n-string"] and "str" in errors["n-string"]
    assert "scan.gpus[0].memory_bytes" in errors["n-huge"]
    assert "images_per_s" in errors["n-nan"]
    assert "scan.gpus" in errors["n-wrong-type"]
    assert "key that is not text" in errors["n-tuple-key"] and "scan.runtimes" in errors["n-tuple-key"]
    assert "set" in errors["n-set"]
    assert doc["summary"]["by_status"] == {"ok": 2, "error": 9}
    assert len(events) == len(answers)
    json.dumps(doc, allow_nan=False)  # the fleet report is JSON
    from mlprobe.commands.fleet import fleet_json

    json.loads(fleet_json(doc))


def test_the_node_task_answers_the_report_of_its_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    """What each node runs (task.scan_node, no Ray needed): the report of the bundle MLPROBE_REPLAY
    names, which the driver reads into the node's summary; a bundle that is not one is the node's
    error, worded as `mlprobe report` words it."""
    from mlprobe.errors import StageError, error_text
    from mlprobe.fleet.ray_scan import accept
    from mlprobe.fleet.task import scan_node

    from .conftest import FIXTURES

    bundle = FIXTURES / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"
    monkeypatch.setenv("MLPROBE_REPLAY", str(bundle))
    answer = scan_node()
    report = answer["report"]
    assert isinstance(report, dict) and isinstance(report["scan"], dict)
    assert report["scan"]["source"] == {"kind": "replay", "bundle": str(bundle), "via": "MLPROBE_REPLAY"}
    read, why = accept(json.loads(json.dumps(answer)))
    assert read is not None and why == "", why
    assert [g.gfx_target for g in read.facts.gpus] == ["gfx1031"]
    torch = (read.facts.plan or {}).get("torch")
    assert torch is not None and torch.recipe == "torch-rocm-amd"
    monkeypatch.setenv("MLPROBE_REPLAY", str(FIXTURES / "no-such-bundle"))
    with pytest.raises(StageError) as err:
        scan_node()
    assert error_text(err.value).startswith("[E101] cannot replay ") and "(from MLPROBE_REPLAY)" in err.value.what
