"""GPUs of one machine measured against each other: with several GPUs of the same model, one that
trains the tiny CNN more than 20 % slower than the others is named (a lower clock or power cap, a
PCIe link that trained down, thermal throttling, or another process on it).

Pure: it reads the device results of a verify run (typed, or the records `runner.device_record` builds)
and nothing else.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..model.jsontypes import JsonObject, JsonValue
from ..model.verify import DeviceResult
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

    def to_dict(self) -> JsonObject:
        """As the verify result's `slow_gpus` lists it."""
        return {"framework": self.framework, "device": self.device, "name": self.name,
                "images_per_s": self.images_per_s, "peer_median": self.peer_median,
                "peers": list(self.peers), "slower_by": round(self.slower_by, 3), "message": self.sentence()}


@dataclass(frozen=True)
class GpuRun:
    """What the peer comparison reads of one device result: which framework ran which device (its
    kind and model), the verdict, and the speed it measured (None: failed, wrong or no figure)."""

    framework: str
    device: str
    kind: Optional[str]
    name: Optional[str]
    verdict: Optional[str]
    images_per_s: Optional[float]

    @classmethod
    def of(cls, rec: Union[DeviceResult, Mapping[str, JsonValue]]) -> "GpuRun":
        """From a typed device result or a verify document's record of one (runner.device_record)."""
        if isinstance(rec, DeviceResult):
            return cls(rec.framework, rec.device, rec.kind, rec.name, rec.verdict,
                       _ips(bool(rec.failure), rec.speed))
        name, kind, verdict, speed = rec.get("name"), rec.get("kind"), rec.get("verdict"), rec.get("speed")
        return cls(framework=str(rec.get("framework")), device=str(rec.get("device")),
                   kind=kind if isinstance(kind, str) else None, name=name if isinstance(name, str) else None,
                   verdict=verdict if isinstance(verdict, str) else None,
                   images_per_s=_ips(bool(rec.get("failure")), speed if isinstance(speed, dict) else None))

    @property
    def gpu(self) -> bool:
        return self.kind in GPU_KINDS


def _ips(failed: bool, speed: Optional[Mapping[str, object]]) -> Optional[float]:
    if failed or speed is None or speed.get("error") or speed.get("nan"):
        return None
    v = speed.get("images_per_s")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


Results = Sequence[Union[DeviceResult, Mapping[str, JsonValue]]]


def slow_gpus(results: Results, slower_by: float = SLOWER_BY) -> List[SlowGpu]:
    """Each GPU whose speed is below (1 - slower_by) x the median of the other GPUs of the same
    framework and model. A GPU without a speed figure (failed, wrong results) is no one's peer."""
    groups: Dict[Tuple[str, str, str], List[Tuple[str, Optional[str], float]]] = {}
    for run in map(GpuRun.of, results):
        if not run.gpu or run.images_per_s is None:
            continue
        key = (run.framework, str(run.kind), run.name or "")
        groups.setdefault(key, []).append((run.device, run.name, run.images_per_s))
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


def per_gpu_lines(results: Results) -> List[str]:
    """One line per GPU result when a framework ran on several GPUs: device, verdict, speed."""
    by_fw: Dict[str, List[GpuRun]] = {}
    for run in map(GpuRun.of, results):
        if run.gpu:
            by_fw.setdefault(run.framework, []).append(run)
    lines: List[str] = []
    for fw, runs in by_fw.items():
        if len(runs) < 2:
            continue
        for r in runs:
            ips = r.images_per_s
            lines.append(f"{fw} {r.device} ({r.name or '?'}): {r.verdict}"
                         + (f", {ips:,.0f} images/s" if ips else ""))
    return lines


__all__ = ["SLOWER_BY", "GpuRun", "SlowGpu", "per_gpu_lines", "slow_gpus"]
