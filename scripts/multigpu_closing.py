"""The figures of a multi-GPU live run, as Markdown: every GPU (bus id, memory, compute capability,
topology), what the plan says each framework will use (with and without a CUDA_VISIBLE_DEVICES that
hides GPUs), verify's result per GPU (verdict, speed) and any GPU named as slower than its peers.

    python scripts/multigpu_closing.py OUT_DIR > OUT_DIR/CLOSING.md

Reads scan.json, plan.json, plan-hidden.json, verify.json and commands.txt from OUT_DIR (those that
exist); scripts/multigpu-live.sh writes them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional


def _load(folder: Path, name: str) -> Optional[Dict[str, Any]]:
    try:
        doc = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _gib(n: Any) -> str:
    return f"{n / 2**30:.1f} GiB" if isinstance(n, (int, float)) else "?"


def scan_lines(scan: Dict[str, Any]) -> List[str]:
    gpus = [g for g in scan.get("gpus") or [] if g.get("vendor") == "nvidia"]
    cuda = (scan.get("runtimes") or {}).get("cuda") or {}
    out = [f"## scan: {len(gpus)} NVIDIA GPU(s), driver {cuda.get('driver_version')}, CUDA {cuda.get('version')}", ""]
    topo = cuda.get("topology") or {}
    if topo:
        out += [f"GPU links: {topo.get('summary')} (NVLink pairs {topo.get('nvlink_pairs')} of "
                f"{topo.get('gpu_pairs')}; NICs: {', '.join(topo.get('nics') or []) or 'none'})", ""]
    out += ["| # | name | bus id | memory | cc | NUMA / CPUs | links |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for i, g in enumerate(gpus):
        t = g.get("topology") or {}
        links = ", ".join(sorted({str(x.get("code")) for x in t.get("links") or []}))
        out.append(f"| {t.get('index', i)} | {g.get('name')} | {g.get('pci_bus_id')} | {_gib(g.get('memory_bytes'))} | "
                   f"{g.get('compute_capability')} | {t.get('numa_affinity')} / {t.get('cpu_affinity')} | {links} |")
    return out + [""]


def plan_lines(plan: Dict[str, Any], title: str) -> List[str]:
    out = [f"## {title}", ""]
    for u in plan.get("gpu_use") or []:
        out.append(f"- {u.get('framework')} -> {u.get('recipe')}: {len(u.get('visible') or [])} of {u.get('gpus')} "
                   f"GPU(s) {u.get('devices')}: {u.get('how')}")
        out += [f"  - {n}" for n in u.get("notes") or []]
    return out + [""]


def verify_lines(verify: Dict[str, Any]) -> List[str]:
    out = ["## verify --framework torch", "", "| device | name | verdict | images/s | vs CPU |", "| --- | --- | --- | --- | --- |"]
    for r in verify.get("results") or []:
        ips = (r.get("speed") or {}).get("images_per_s")
        out.append(f"| {r.get('device')} | {r.get('name')} | {r.get('verdict')} | "
                   f"{f'{ips:,.0f}' if isinstance(ips, (int, float)) else ''} | {r.get('speedup_vs_framework_cpu') or ''} |")
    slow = verify.get("slow_gpus") or []
    out += ["", "Slower than peers (> 20 %): " + ("; ".join(str(s.get("message")) for s in slow) if slow else "none"),
            f"exit code {verify.get('exit_code')}, {verify.get('wall_s')} s", ""]
    return out


def closing(folder: Path) -> str:
    lines = ["# Multi-GPU live run", ""]
    commands = folder / "commands.txt"
    if commands.is_file():
        lines += ["Commands:", "", "```", commands.read_text(encoding="utf-8").rstrip(), "```", ""]
    for name, fn in (("scan.json", scan_lines),):
        doc = _load(folder, name)
        lines += fn(doc) if doc else [f"({name} missing)", ""]
    for name, title in (("plan.json", "plan"), ("plan-hidden.json", "plan with CUDA_VISIBLE_DEVICES=0")):
        doc = _load(folder, name)
        lines += plan_lines(doc, title) if doc else [f"({name} missing)", ""]
    doc = _load(folder, "verify.json")
    lines += verify_lines(doc) if doc else ["(verify.json missing)", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(closing(Path(sys.argv[1])) + "\n")
