"""Replay cost of the capture parsers per fixture class: the kernel-port /proc/cpuinfo parsers, ARM
core decoding, clinfo with NVIDIA/AMD attributes, and `nvidia-smi -q` text.

For each class it prints the parser's median time per capture (warm: knowledge tables loaded once, as
in a scan) and the median time of a whole `scan` replay of those bundles. The peer, measured in the
same run, is the x86 /proc/cpuinfo path of the same parser on the x86 fixtures (the layout the
parser handled before the other ports were added). The target: no new parser adds more than 5 ms to
a replay.

    python benchmarks/bench_parsers.py [-n 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlprobe.scan.capture import decode
from mlprobe.errors import ParseError  # noqa: E402
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import cpu, nvidia, opencl  # noqa: E402
from mlprobe.probes.cpu_ports import detect_port  # noqa: E402
from mlprobe.scan.run import scan

FIXTURES = ROOT / "fixtures"


def median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def classes() -> Dict[str, List[Tuple[Path, str, Callable[[str], object]]]]:
    out: Dict[str, List[Tuple[Path, str, Callable[[str], object]]]] = {}
    for path in sorted(FIXTURES.glob("*/proc-cpuinfo.txt")):
        port = detect_port(cpu._kv_blocks(decode(path.read_bytes())))
        name = {"x86": "cpuinfo x86 (peer)", "arm": "cpuinfo arm/arm64"}.get(
            port or "", "cpuinfo other ports"
        )
        out.setdefault(name, []).append((path, "proc-cpuinfo.txt", cpu.parse_proc_cpuinfo))
    for path in sorted(FIXTURES.glob("*/clinfo.txt")):
        out.setdefault("clinfo text", []).append((path, "clinfo.txt", opencl.parse_clinfo))
    for path in sorted(FIXTURES.glob("*/nvidia-smi-q.txt")):
        out.setdefault("nvidia-smi -q text", []).append((path, "nvidia-smi-q.txt", nvidia.parse_smi_q))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30)
    args = ap.parse_args()
    rows = []
    for name, items in classes().items():
        parse_ms, replay_ms = [], []
        for path, _capture, parser in items:
            text = decode(path.read_bytes())

            def run(parser: Callable[[str], object] = parser, text: str = text) -> None:
                try:
                    parser(text)
                except ParseError:  # a capture with nothing to read (e.g. no OpenCL platform) still costs
                    pass

            run()  # warm the knowledge tables, as a scan does
            parse_ms.append(median_ms(run, args.n))
            host = ReplayHost(path.parent)
            scan(host)
            replay_ms.append(median_ms(lambda: scan(ReplayHost(path.parent)), max(5, args.n // 5)))
        rows.append(
            (name, len(items), statistics.median(parse_ms), max(parse_ms), statistics.median(replay_ms))
        )
    print(
        f"{'class':24} {'bundles':>7} {'parse median ms':>16} {'parse max ms':>13} {'replay median ms':>17}"
    )
    for name, count, med, worst, replay in rows:
        print(f"{name:24} {count:7d} {med:16.3f} {worst:13.3f} {replay:17.2f}")
    peer = next((r for r in rows if r[0].startswith("cpuinfo x86")), None)
    if peer:
        for name, _count, med, worst, _replay in rows:
            if name.startswith("cpuinfo") and name != peer[0]:
                print(
                    f"{name}: median {med / peer[2]:.2f}x the x86 path; worst capture {worst:.3f} ms "
                    f"({'within' if worst < 5 else 'OVER'} the 5 ms budget)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
