"""A real fleet report (fleet scan of a one-node Ray cluster on the H200 machine, Ray 2.60): it
validates against the shipped schema, and `fleet show` prints its node with every GPU and the plan."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema

from mlprobe.fleet.document import fleet_schema
from mlprobe.model.docversion import schema_id, upgraded

from .conftest import FIXTURES, ROOT

FLEET = FIXTURES / "fleet-linux-nvidia-h200-one-node" / "fleet.json"


def test_real_fleet_report_validates_and_lists_the_node_with_its_gpu() -> None:
    # a version-1 document (`fleet_version: 1`): the versions differ in the version key only, so with
    # today's key it validates against today's schema
    doc = upgraded(json.loads(FLEET.read_text(encoding="utf-8")), "fleet")
    assert doc["schema"] == "mlprobe.fleet/1"
    jsonschema.validate({**doc, "schema": schema_id("fleet")}, fleet_schema())
    assert doc["source"]["kind"] == "ray" and doc["summary"]["by_status"] == {"ok": 1}
    (node,) = doc["nodes"]
    gpus = node["report"]["scan"]["gpus"]
    assert [(g["name"], g["compute_capability"]) for g in gpus] == [("NVIDIA H200", "9.0")]
    assert node["facts"]["plan"]["torch"]["recipe"] == "torch-cuda"
    assert node["facts"]["plan"]["jax"]["recipe"] == "jax-cuda13"


def test_fleet_show_prints_it() -> None:
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "mlprobe", "fleet", "show", str(FLEET)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "NVIDIA H200" in proc.stdout and "192.0.2.2" in proc.stdout and "jax-cuda13" in proc.stdout
    assert "1 node (ok 1)" in proc.stdout
