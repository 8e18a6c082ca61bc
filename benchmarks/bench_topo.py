"""What `nvidia-smi topo -m` adds to a replay: the parser's median and worst time per fixture matrix
(warm), the same for a synthetic 16-GPU matrix with 10 NICs (the DGX-2 shape, the most columns one
host prints; a 72-GPU matrix is shown too, for scale), and a whole `scan` replay of the H200 bundle with and without its
nvidia-smi-topo-m.txt (the peer, measured in the same run). The target: under 5 ms added.

    python benchmarks/bench_topo.py [-n 30]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlprobe.probes.nvidia_topo import gpu_topology, parse_topo_matrix, summary  # noqa: E402
from mlprobe.scan.capture import decode  # noqa: E402
from mlprobe.scan.host import ReplayHost  # noqa: E402
from mlprobe.scan.run import scan  # noqa: E402

FIXTURES = ROOT / "fixtures"
BUNDLE = FIXTURES / "linux-nvidia-h200-live-khronos-icd"


def median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def everything(text: str) -> None:
    """Parse, then build every GPU's facts and the summary: all a scan does with the matrix."""
    topo = parse_topo_matrix(text)
    for g in topo.gpus:
        gpu_topology(topo, g)
    summary(topo)


def big_matrix(gpus: int = 72, nics: int = 18) -> str:
    cols = [f"GPU{i}" for i in range(gpus)] + [f"NIC{i}" for i in range(nics)]
    lines = ["\t" + "\t".join(cols) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for i, row in enumerate(cols):
        cells = ["X" if row == c else "NV18" if c.startswith("GPU") and row.startswith("GPU") else "SYS" for c in cols]
        tail = f"\t0-71\t{i % 2}\t\tN/A" if row.startswith("GPU") else "\t\t\t\t"
        lines.append(row + "\t" + "\t".join(f" {c} " if c == "X" else c for c in cells) + tail)
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30)
    args = ap.parse_args()
    print(f"{'matrix':58} {'parse+facts median ms':>22} {'max ms':>8}")
    worst_all = 0.0
    cases = [(p.parent.name, decode(p.read_bytes())) for p in sorted(FIXTURES.glob("*/nvidia-smi-topo-m.txt"))]
    cases.append(("synthetic 16 GPUs + 10 NICs (DGX-2-sized)", big_matrix(16, 10)))
    cases.append(("synthetic 72 GPUs + 18 NICs (for scale)", big_matrix()))
    for name, text in cases:
        everything(text)
        times = []
        for _ in range(args.n):
            t = time.perf_counter()
            everything(text)
            times.append((time.perf_counter() - t) * 1000)
        if "for scale" not in name:
            worst_all = max(worst_all, statistics.median(times))
        print(f"{name:58} {statistics.median(times):22.3f} {max(times):8.3f}")

    with tempfile.TemporaryDirectory() as tmp:
        without = Path(tmp) / "without-topo"
        shutil.copytree(BUNDLE, without)
        (without / "nvidia-smi-topo-m.txt").unlink()
        reps = max(9, args.n // 2)
        scan(ReplayHost(BUNDLE))
        scan(ReplayHost(without))
        with_ms, without_ms = [], []
        for _ in range(3):  # interleaved, so drift hits both alike
            with_ms.append(median_ms(lambda: scan(ReplayHost(BUNDLE)), reps))
            without_ms.append(median_ms(lambda: scan(ReplayHost(without)), reps))
        w, wo = statistics.median(with_ms), statistics.median(without_ms)
    print(f"scan replay of {BUNDLE.name}: {w:.2f} ms with the matrix, {wo:.2f} ms without "
          f"(peer): {w - wo:+.2f} ms added")
    print(f"slowest matrix (median, real shapes) {worst_all:.3f} ms; "
          f"{'within' if max(worst_all, w - wo) < 5 else 'OVER'} the 5 ms budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
