"""`mlprobe fleet scan` on a real Ray cluster on this machine: four nodes, each started with its own
MLPROBE_REPLAY bundle (the H200 machine's capture, an RX 6700 XT, an Opteron without AVX) or none (this
machine, live). Every node's own facts come back, in four groups with the right plan each. Then a fifth
node whose nvidia-smi hangs has its raylet killed during the scan: it is reported lost, the others
complete, and the command ends well within its time limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import jsonschema
import pytest

from mlprobe.fleet.document import fleet_schema

from .conftest import FIXTURES, ROOT

pytestmark = pytest.mark.slow  # a real local Ray cluster

ray = pytest.importorskip("ray", reason="Ray is not installed (python -m pip install -e '.[ray]')")

from .ray_cluster import LocalRayCluster  # noqa: E402

BUNDLES = {
    "h200": FIXTURES / "linux-nvidia-h200-mlprobe-capture",
    "rx6700xt": FIXTURES / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo",
    "opteron": FIXTURES / "linux-nogpu-amd-opteron-8354-no-avx",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    c = LocalRayCluster()
    try:
        c.start_head("live")  # the head node scans this machine
        for name, bundle in BUNDLES.items():
            c.add_node(name, {"MLPROBE_REPLAY": str(bundle)})
        c.wait_nodes(4)
        yield c
    finally:
        c.stop()


def fleet_scan(address: str, timeout: float, *extra: str) -> "subprocess.CompletedProcess[str]":
    env = {k: v for k, v in os.environ.items() if k not in ("MLPROBE_REPLAY", "RAY_ADDRESS")}
    return subprocess.run([sys.executable, "-m", "mlprobe", "fleet", "scan", "--address", address, "--json",
                           "--timeout", str(timeout), *extra],
                          capture_output=True, text=True, timeout=timeout + 60, cwd=ROOT, env=env)


def by_bundle(doc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    out = {}
    for n in doc["nodes"]:
        src = (n.get("facts") or {}).get("source") or {}
        key = next((k for k, b in BUNDLES.items() if src.get("bundle") == str(b)), "live")
        out[key] = n
    return out


def test_four_nodes_each_with_its_own_facts(cluster: LocalRayCluster) -> None:
    from mlprobe.scan.host import LiveHost
    from tests.report_doc import build_report

    proc = fleet_scan(cluster.address, 120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, fleet_schema())
    assert doc["summary"]["nodes"] == 4 and doc["summary"]["by_status"] == {"ok": 4}
    assert doc["summary"]["groups"] == 4
    nodes = by_bundle(doc)
    assert set(nodes) == {"live", *BUNDLES}
    assert len({n["ray_node_id"] for n in nodes.values()}) == 4
    for key, n in nodes.items():
        src = n["report"]["scan"]["source"]
        if key == "live":
            assert src == {"kind": "live"}
        else:
            assert src == {"kind": "replay", "bundle": str(BUNDLES[key]), "via": "MLPROBE_REPLAY"}
    plan = {k: n["facts"]["plan"] for k, n in nodes.items()}
    h200, rx, old, live = nodes["h200"]["facts"], nodes["rx6700xt"]["facts"], nodes["opteron"]["facts"], nodes["live"]["facts"]
    assert [g["name"] for g in h200["gpus"]] == ["NVIDIA H200"] and h200["driver"] == "580.159.04"
    assert plan["h200"]["torch"]["recipe"] == "torch-cuda"
    assert [g["gfx_target"] for g in rx["gpus"]] == ["gfx1031"]
    assert plan["rx6700xt"]["torch"]["recipe"] == "torch-rocm-amd"  # AMD's native gfx1031 build
    assert plan["rx6700xt"]["torch"]["env"] == {}  # AMD's wheels carry gfx1031 kernels: no override
    assert old["cpu"]["x86_64_level"] == 1 and old["gpus"] == []
    assert plan["opteron"]["tensorflow"] is None and plan["opteron"]["torch"]["recipe"] == "torch-cpu"
    # the live node is this machine: the same CPU and plan as a report made here
    here = build_report(LiveHost())
    assert live["cpu"]["model"] == here["scan"]["cpu"]["model"]
    assert {fw: (c or {}).get("recipe") for fw, c in plan["live"].items()} == here["plan"]["top"]
    # each group holds one node and carries that node's plan
    groups = {g["nodes"][0]: g for g in doc["groups"]}
    for n in nodes.values():
        assert groups[n["name"]]["plan"] == n["facts"]["plan"]


AGENTS = """
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False, namespace="mlprobe")
out = {}
for a in ray.util.list_named_actors(all_namespaces=True):
    if a["namespace"] == "mlprobe" and a["name"].startswith("mlprobe-agent-"):
        out[a["name"]] = ray.get_actor(a["name"], namespace="mlprobe")._actor_id.hex()
print(json.dumps(out))
ray.shutdown()
"""


def agents(address: str) -> Dict[str, str]:
    """name -> actor id of the mlprobe agents alive on the cluster (asked by a separate driver)."""
    proc = subprocess.run([sys.executable, "-c", AGENTS, address], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_kept_agents_serve_a_repeat_scan_and_end_themselves(cluster: LocalRayCluster) -> None:
    assert agents(cluster.address) == {}  # a plain scan leaves nothing behind
    first = fleet_scan(cluster.address, 120, "--keep-agents", "60")
    assert first.returncode == 0, first.stderr[-3000:]
    doc1 = json.loads(first.stdout)
    jsonschema.validate(doc1, fleet_schema())
    assert doc1["source"]["keep_agents_s"] == 60 and doc1["summary"]["by_status"] == {"ok": 4}
    kept = agents(cluster.address)
    assert len(kept) == 4, kept  # one per node
    # one agent killed from outside: its node gets a new one, the others serve their second scan
    victim = sorted(kept)[0]
    kill = subprocess.run([sys.executable, "-c", "import ray, sys; ray.init(address=sys.argv[1], "
                           "logging_level='ERROR', log_to_driver=False); "
                           "ray.kill(ray.get_actor(sys.argv[2], namespace='mlprobe'), no_restart=True)",
                           cluster.address, victim], capture_output=True, text=True, timeout=120)
    assert kill.returncode == 0, kill.stderr[-2000:]
    second = fleet_scan(cluster.address, 120, "--keep-agents", "2")
    assert second.returncode == 0, second.stderr[-3000:]
    doc2 = json.loads(second.stdout)
    jsonschema.validate(doc2, fleet_schema())
    # each node's own facts again, read afresh: the same answer as a cold scan gives
    one, two = by_bundle(doc1), by_bundle(doc2)
    assert set(two) == {"live", *BUNDLES}
    for key in one:
        assert two[key]["facts"]["plan"] == one[key]["facts"]["plan"]
        assert two[key]["facts"]["gpus"] == one[key]["facts"]["gpus"]
        assert two[key]["ray_node_id"] == one[key]["ray_node_id"]
        assert one[key]["agent"]["scans"] == 1
    # the same process on each node served both scans, but on the victim's node: a new one
    victim_node = next(k for k, n in one.items() if victim.endswith(n["ray_node_id"][:16]))
    for key in one:
        if key == victim_node:
            assert two[key]["agent"]["scans"] == 1 and two[key]["agent"]["pid"] != one[key]["agent"]["pid"]
        else:
            assert two[key]["agent"]["scans"] == 2 and two[key]["agent"]["pid"] == one[key]["agent"]["pid"]
    # the second scan set their keep time to 2 s: idle that long, they end and free their names
    deadline = time.monotonic() + 30
    while agents(cluster.address) and time.monotonic() < deadline:
        time.sleep(1)
    assert agents(cluster.address) == {}


def test_killed_node_is_lost_and_the_scan_ends_in_time(cluster: LocalRayCluster, tmp_path: Path) -> None:
    # A fifth node (live) whose nvidia-smi hangs: it signals when its scan has started to wait on it.
    fake = tmp_path / "bin"
    fake.mkdir()
    started = tmp_path / "nvidia-smi-started"
    script = fake / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ntouch '{started}'\nexec sleep 120\n")
    script.chmod(0o755)
    cluster.add_node("hang", {"PATH": f"{fake}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                                      f"{os.environ.get('PATH', '')}"})
    cluster.wait_nodes(5)
    timeout = 60.0
    env = {k: v for k, v in os.environ.items() if k not in ("MLPROBE_REPLAY", "RAY_ADDRESS")}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "mlprobe", "fleet", "scan", "--address", cluster.address,
                             "--json", "--timeout", str(timeout)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 40
        while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert started.exists(), "the hanging node's scan never reached nvidia-smi"
        cluster.kill_raylet("hang")
        killed_at = time.monotonic() - t0
        out, err = proc.communicate(timeout=timeout + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in cluster.processes("hang"):  # its orphaned worker and the fake tool
            try:
                p.kill()
            except Exception:
                pass
    wall = time.monotonic() - t0
    assert proc.returncode == 1, err[-3000:]  # some node has no report
    doc = json.loads(out)
    jsonschema.validate(doc, fleet_schema())
    statuses = sorted(n["status"] for n in doc["nodes"])
    assert statuses == ["lost", "ok", "ok", "ok", "ok"], doc["nodes"]
    lost = next(n for n in doc["nodes"] if n["status"] == "lost")
    assert lost["facts"] is None and lost["group"] is None and lost["error"]
    assert doc["summary"]["groups"] == 4
    assert wall < timeout, (wall, killed_at)
    print(f"killed at {killed_at:.1f} s, the command ended at {wall:.1f} s (limit {timeout:g} s)")


def test_classify_task_errors() -> None:
    from mlprobe.fleet.ray_scan import classify

    class TaskError(Exception):
        def __init__(self, cause: BaseException) -> None:
            super().__init__(str(cause))
            self.cause = cause

    assert classify(TaskError(ModuleNotFoundError("No module named 'mlprobe'")), True)[0] == "no-mlprobe"
    assert classify(RuntimeError("boom"), False)[0] == "lost"
    status, text = classify(TaskError(ValueError("bad bundle")), True)
    assert status == "error" and "bad bundle" in text
    assert classify(ray.exceptions.NodeDiedError("node x died"), True)[0] == "lost"


def test_nothing_listening_is_a_quick_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from mlprobe.cli import main

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.monotonic()
    assert main(["fleet", "scan", "--address", f"127.0.0.1:{port}", "--timeout", "5"]) == 2
    err = capsys.readouterr().err
    assert "E904" in err and "nothing answers" in err
    assert time.monotonic() - t < 10


def test_without_ray_installed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from mlprobe.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main(["fleet", "scan", "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    # this mlprobe runs from a checkout: the advice installs the extra from that checkout, not from
    # an index (where `mlprobe[ray]` would fetch another mlprobe, or nothing)
    root = Path(__file__).resolve().parent.parent
    assert "E903" in err and f"python -m pip install -e '{root}[ray]'" in err, err
