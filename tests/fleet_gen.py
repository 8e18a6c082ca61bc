"""Fleets of report files for `fleet merge` tests and benchmarks/bench_fleet.py: real reports of
fixture bundles (made with the same builder as `mlprobe report --replay`), copied per node, with
known drift injected (an older NVIDIA driver on some nodes, an older torch build on others). The
injected drift is the ground truth a merge must find, no more and no less."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

from mlprobe.scan.host import ReplayHost
from tests.report_doc import build_report
from mlprobe.report.envelope import ReportOptions

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# Distinct hardware, each its own group; the NVIDIA ones carry a driver that can drift.
TEMPLATES = [
    "linux-nvidia-h200-mlprobe-capture",
    "linux-nvidia-gh200-x4-smi",
    "linux-nvidia-rtx3060-smi-xml",
    "linux-nvidia-a100-sxm4-mig-smi-xml",
    "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo",
    "linux-amd-mi300x-x4-rocminfo-rocm-smi",
    "linux-nogpu-amd-opteron-8354-no-avx",
    "linux-nogpu-amd-epyc-zen5-mlprobe-capture",
]
# The verify result of the H200 machine (a real run), carried by the H200 nodes' reports.
H200_VERIFY = FIXTURES / "verify-linux-nvidia-h200-torch-2.11-cu130" / "result.json"
OLD_DRIVER = "535.54.03"


def template_reports() -> List[Dict[str, Any]]:
    out = []
    for name in TEMPLATES:
        doc = build_report(ReplayHost(FIXTURES / name), ReportOptions(),
                           source={"kind": "replay", "bundle": name}, now="2026-01-01T00:00:00Z")
        if name == "linux-nvidia-h200-mlprobe-capture":
            doc["verify"] = json.loads(H200_VERIFY.read_text(encoding="utf-8"))
        out.append(doc)
    return out


def with_driver(doc: Dict[str, Any], driver: str) -> Dict[str, Any]:
    d = copy.deepcopy(doc)
    for g in d["scan"]["gpus"]:
        if g.get("driver_version"):
            g["driver_version"] = driver
    cuda = (d["scan"].get("runtimes") or {}).get("cuda")
    if cuda and cuda.get("driver_version"):
        cuda["driver_version"] = driver
    return d


def with_torch(doc: Dict[str, Any], version: str) -> Dict[str, Any]:
    d = copy.deepcopy(doc)
    for f in d["scan"]["frameworks"]:
        if f.get("name") == "torch":
            f["version"] = version
    return d


def has_driver(doc: Dict[str, Any]) -> bool:
    return any(g.get("driver_version") for g in doc["scan"]["gpus"])


def has_torch(doc: Dict[str, Any]) -> bool:
    return any(f.get("name") == "torch" for f in doc["scan"]["frameworks"])


def write_fleet(folder: Path, count: int, driver_every: int = 50, torch_every: int = 40,
                templates: List[Dict[str, Any]] | None = None) -> Tuple[Dict[str, int], Set[Tuple[str, str]]]:
    """Write `count` reports node-00000.json... into folder. Returns (node -> template index, the
    injected drift as (node, field) pairs: field "driver" or "framework:torch")."""
    templates = templates if templates is not None else template_reports()
    texts = [json.dumps(t, indent=1).encode("utf-8") for t in templates]
    folder.mkdir(parents=True, exist_ok=True)
    membership: Dict[str, int] = {}
    drift: Set[Tuple[str, str]] = set()
    for i in range(count):
        t = i % len(templates)
        name = f"node-{i:05d}"
        membership[name] = t
        doc = templates[t]
        data = texts[t]
        j = i // len(templates)  # the how-manieth node of its template
        if j % driver_every == driver_every - 1 and has_driver(doc):
            doc = with_driver(doc, OLD_DRIVER)
            drift.add((name, "driver"))
        elif j % torch_every == torch_every // 2 and has_torch(doc):
            doc = with_torch(doc, "2.10.0")
            drift.add((name, "framework:torch"))
        if doc is not templates[t]:
            data = json.dumps(doc, indent=1).encode("utf-8")
        (folder / f"{name}.json").write_bytes(data)
    return membership, drift
