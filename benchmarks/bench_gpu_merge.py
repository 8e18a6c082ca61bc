"""GPU merge and oversized captures. Prints, for N GPUs seen by two sources (nvidia-smi-like, with a
bus id and UUID, and lspci-like, with a bus id), the time of mlprobe.scan.merge_gpus next to the
pairwise merge it replaced (each device compared with every merged entry; measured in the same run,
up to 4,000 GPUs), then the wall time and peak memory of `mlprobe scan|plan --replay` of a bundle
whose lspci.txt is 4,000 GPU lines and one of ~50 MB (capped at the live capture's 8 MiB on read).

    python benchmarks/bench_gpu_merge.py
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlprobe.model.facts import GpuFacts
from mlprobe.scan.run import _combine, _same_gpu, merge_gpus


def pairwise_merge(observations: List[Tuple[str, List[GpuFacts]]]) -> List[GpuFacts]:
    """The merge as it was: every device against every merged entry (quadratic)."""
    merged: List[GpuFacts] = []
    for source, gpus in observations:
        taken: set = set()
        leftovers = []
        for g in gpus:
            match = None
            for i, m in enumerate(merged):
                if i not in taken and source not in m.sources and _same_gpu(m, g):
                    match = i
                    break
            if match is None:
                leftovers.append(g)
                continue
            taken.add(match)
            merged[match] = _combine(merged[match], g)
        for g in leftovers:
            same_vendor = [i for i, m in enumerate(merged) if m.vendor == g.vendor and i not in taken
                           and source not in m.sources]
            others = [x for x in gpus if x.vendor == g.vendor]
            if len(same_vendor) == 1 and len(others) == 1 and not (merged[same_vendor[0]].pci_bus_id and g.pci_bus_id):
                taken.add(same_vendor[0])
                merged[same_vendor[0]] = _combine(merged[same_vendor[0]], g)
            else:
                merged.append(replace(g, sources=tuple(dict.fromkeys(g.sources or (source,)))))
    return merged


def bus(i: int) -> str:
    return f"{i >> 16:04x}:{(i >> 8) & 0xff:02x}:{(i >> 3) & 0x1f:02x}.{i % 8}"


def observations(n: int) -> List[Tuple[str, List[GpuFacts]]]:
    smi = [GpuFacts(vendor="nvidia", name="NVIDIA GeForce RTX 3090", pci_bus_id=bus(i),
                    uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000", sources=("nvidia",)) for i in range(n)]
    pci = [GpuFacts(vendor="nvidia", name="GeForce RTX 3090", pci_bus_id=bus(i), pci_device_id="2204",
                    sources=("pci",)) for i in reversed(range(n))]
    return [("nvidia", smi), ("pci", pci)]


def best_of(fn, arg, repeats: int = 3) -> float:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(arg)
        out.append(time.perf_counter() - t)
    return min(out)


def lspci_bundle(folder: Path, lines: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lspci.txt", "w", encoding="utf-8") as fh:
        for i in range(lines):
            fh.write(f"{bus(i)} VGA compatible controller [0300]: NVIDIA Corporation GA102 "
                     "[GeForce RTX 3090] [10de:2204] (rev a1)\n")
    return folder


def run(argv: List[str]) -> Tuple[float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mlprobe", *argv], check=True, stdout=subprocess.DEVNULL,
                   cwd=ROOT, timeout=600)
    wall = time.perf_counter() - t
    return wall, max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)


def main() -> None:
    print("merge of N GPUs seen by two sources (best of 3)")
    print(f"{'N':>7}  {'merge_gpus':>10}  {'pairwise (before)':>17}")
    for n in (250, 1000, 4000, 16000, 64000):
        obs = observations(n)
        new = best_of(merge_gpus, obs)
        assert len(merge_gpus(obs)) == n
        old = f"{best_of(pairwise_merge, obs, 1):.3f} s" if n <= 4000 else "(skipped)"
        print(f"{n:>7}  {new:>8.3f} s  {old:>17}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, lines in (("4,000 lspci GPU lines", 4000), ("~50 MB lspci.txt", 420_000)):
            b = lspci_bundle(Path(tmp) / str(lines), lines)
            size = os.path.getsize(b / "lspci.txt")
            for cmd in (["scan", "--json"], ["plan", "--json"]):
                wall, rss = run([*cmd, "--replay", str(b)])
                print(f"{label} ({size / 1e6:.1f} MB): mlprobe {' '.join(cmd)} --replay: "
                      f"{wall:.2f} s, peak RSS of the children so far {rss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
