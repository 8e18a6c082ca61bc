"""How long a command takes to its first byte of output, to its exit, and between the two (what a
process spends ending once its answer is out: interpreter teardown, driver libraries unloading).

    python benchmarks/bench_scan_exit.py [-n 9] -- python -m mlprobe scan --json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from typing import List


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=9)
    ap.add_argument("argv", nargs="+")
    args = ap.parse_args()
    first: List[float] = []
    ends: List[float] = []
    for _ in range(args.n):
        t0 = time.perf_counter()
        proc = subprocess.Popen(args.argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        os.read(proc.stdout.fileno(), 1)
        first.append(time.perf_counter() - t0)
        proc.stdout.read()
        proc.wait()
        ends.append(time.perf_counter() - t0)
    after = [b - a for a, b in zip(first, ends)]
    print(f"{' '.join(args.argv)}: first byte {statistics.median(first):.3f} s, exit {statistics.median(ends):.3f} s, "
          f"after the first byte {statistics.median(after):.3f} s (medians of {args.n})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
