"""GPUs of one machine measured against each other: with several GPUs of the same model, one that
trains the tiny CNN more than 20 % slower than the others is named (a lower clock or power cap, a
PCIe link that trained down, thermal throttling, or another process on it).

Pure: it reads the device results of a verify run (`runner.device_record`) and nothing else.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..model.vocabulary import vocabulary

SLOWER_BY = 0.20  # slower than the median of its peers by more than this fraction
GPU_KINDS = vocabulary().gpu_backends()  # the registry's GPU backends: the device kinds that are GPUs


@dataclass(frozen=True)
class SlowGpu:
    framework: str
    device: str  # cuda:3
    name: Optional[str]
    images_per_s: float
    peer_median: float  # images/s, the median of the others of the same model
    peers: Tuple[str, ...]  # their device ids
    slower_by: float  # 0.31 = 31 % slower

    def sentence(self) -> str:
        pct = round(self.slower_by * 100)
        others = len(self.peers)
        return (f"{self.framework} on {self.device} ({self.name or 'GPU'}) is {pct} % slower than its "
                f"{others} peer{'s' if others != 1 else ''} of the same model ({self.images_per_s:,.0f} "
                f"images/s against a median of {self.peer_median:,.0f}): check its clocks and power cap "
                "(`nvidia-smi -q -d CLOCK,POWER,PERFORMANCE`), its PCIe link width, and whether another "
                "process is using it")

    def to_dict(self) -> Dict[str, Any]:
        return {"framework": self.framework, "device": self.device, "name": self.name,
                "images_per_s": self.images_per_s, "peer_median": self.peer_median,
                "peers": list(self.peers), "slower_by": round(self.slower_by, 3), "message": self.sentence()}


def _ips(rec: Dict[str, Any]) -> Optional[float]:
    sp = rec.get("speed")
    if rec.get("failure") or not isinstance(sp, dict) or sp.get("error") or sp.get("nan"):
        return None
    v = sp.get("images_per_s")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def slow_gpus(results: Sequence[Dict[str, Any]], slower_by: float = SLOWER_BY) -> List[SlowGpu]:
    """Each GPU whose speed is below (1 - slower_by) x the median of the other GPUs of the same
    framework and model. A GPU without a speed figure (failed, wrong results) is no one's peer."""
    groups: Dict[Tuple[str, str, str], List[Tuple[str, Optional[str], float]]] = {}
    for rec in results:
        if rec.get("kind") not in GPU_KINDS:
            continue
        ips = _ips(rec)
        if ips is None:
            continue
        key = (str(rec.get("framework")), str(rec.get("kind")), str(rec.get("name") or ""))
        groups.setdefault(key, []).append((str(rec.get("device")), rec.get("name"), ips))
    out: List[SlowGpu] = []
    for (framework, _kind, _name), members in groups.items():
        if len(members) < 2:
            continue
        for i, (device, name, ips) in enumerate(members):
            others = [m for j, m in enumerate(members) if j != i]
            med = statistics.median(m[2] for m in others)
            if ips < (1.0 - slower_by) * med:
                out.append(SlowGpu(framework=framework, device=device, name=name, images_per_s=ips,
                                   peer_median=med, peers=tuple(m[0] for m in others),
                                   slower_by=1.0 - ips / med))
    return out


def per_gpu_lines(results: Sequence[Dict[str, Any]]) -> List[str]:
    """One line per GPU result when a framework ran on several GPUs: device, verdict, speed."""
    gpus = [r for r in results if r.get("kind") in GPU_KINDS]
    by_fw: Dict[str, List[Dict[str, Any]]] = {}
    for r in gpus:
        by_fw.setdefault(str(r.get("framework")), []).append(r)
    lines: List[str] = []
    for fw, recs in by_fw.items():
        if len(recs) < 2:
            continue
        for r in recs:
            ips = _ips(r)
            lines.append(f"{fw} {r.get('device')} ({r.get('name') or '?'}): {r.get('verdict')}"
                         + (f", {ips:,.0f} images/s" if ips else ""))
    return lines


__all__ = ["SLOWER_BY", "SlowGpu", "per_gpu_lines", "slow_gpus"]
