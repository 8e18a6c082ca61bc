"""Wall time of `mlprobe plan --replay DIR --json` as a user runs it (a fresh interpreter each time),
next to `mlprobe scan --replay DIR --json` measured in the same run: the difference is what the plan
itself costs. Target: median <= 0.15 s.

    python benchmarks/bench_plan.py [DIR ...] [-n 21]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = [
    ROOT / "fixtures" / "linux-nvidia-h200-mlprobe-capture",
    ROOT / "fixtures" / "linux-nogpu-amd-epyc-pocl-opencl-cpu",
]
TARGET_S = 0.15


CPU: dict = {}  # label -> CPU seconds (user + sys) of each child: a busy machine inflates wall time, not this


ENV = dict(os.environ)


def timed(argv: List[str], n: int, label: str = "") -> List[float]:
    out, cpu = [], []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=ENV)
        out.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    CPU[label] = cpu
    return out


def line(label: str, xs: List[float]) -> str:
    cpu = CPU.get(label)
    extra = f"   cpu median {statistics.median(cpu):.3f} s" if cpu else ""
    return (
        f"{label:<34} median {statistics.median(xs):.3f} s   min {min(xs):.3f}   max {max(xs):.3f}"
        f"{extra}   (n={len(xs)})"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("-n", type=int, default=21)
    ap.add_argument(
        "--no-bytecode",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE as it is (every run compiles every module from source)",
    )
    args = ap.parse_args()
    if not args.no_bytecode:
        # An installed mlprobe has its .pyc files (pip compiles on install); a checkout with
        # PYTHONDONTWRITEBYTECODE=1 recompiles every module on every run. Cache outside the tree.
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), "mlprobe-bench-pycache")
    py = sys.executable
    timed([py, "-m", "mlprobe", "plan", "--replay", str(args.dirs[0]), "--json"], 2)  # warm the disk cache
    worst = 0.0
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, bytecode "
        f"{'as the environment says' if args.no_bytecode else 'cached in ' + ENV['PYTHONPYCACHEPREFIX']}"
    )
    base = timed([py, "-c", "pass"], args.n, "python -c pass")
    print(line("python -c pass", base))
    for d in args.dirs:
        print(f"-- {d.name}")
        scan = timed(
            [py, "-m", "mlprobe", "scan", "--replay", str(d), "--json"],
            args.n,
            "mlprobe scan --replay --json",
        )
        plan = timed(
            [py, "-m", "mlprobe", "plan", "--replay", str(d), "--json"],
            args.n,
            "mlprobe plan --replay --json",
        )
        print(line("mlprobe scan --replay --json", scan))
        print(line("mlprobe plan --replay --json", plan))
        print(
            f"{'plan / scan':<34} {statistics.median(plan) / statistics.median(scan):.2f}x   plan adds "
            f"{(statistics.median(plan) - statistics.median(scan)) * 1000:.0f} ms"
        )
        worst = max(worst, statistics.median(plan))
    print(
        f"target: median <= {TARGET_S:.2f} s -> {'met' if worst <= TARGET_S else 'NOT met'} "
        f"(worst median {worst:.3f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
