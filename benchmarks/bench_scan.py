"""`mlprobe scan --json` against today's common answer, `python -m torch.utils.collect_env`.

Prints wall-clock median/min/max over N runs for both, the ratio, and peak RSS: for mlprobe the
scan process itself (RUSAGE_SELF, measured by a tiny wrapper; the OpenCL child is separate by
design), for collect_env the whole command.

    python benchmarks/bench_scan.py [-n 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

WRAPPER = (
    "import resource, runpy, sys\n"
    "sys.argv = ['mlprobe', 'scan', '--json']\n"
    "try:\n"
    "    runpy.run_module('mlprobe', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "finally:\n"
    "    sys.stderr.write('MAXRSS_KB=%d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
)


ENV = dict(os.environ)


def timed(argv: list[str]) -> tuple[float, int, bytes]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    out, err = proc.communicate(timeout=300)
    wall = time.perf_counter() - start
    # wait4 already reaped it through communicate; fall back to parsing the wrapper's line.
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed: {err.decode(errors='replace')[-500:]}")
    return wall, 0, err


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE as it is (every run compiles mlprobe from source)")
    args = ap.parse_args()
    if not args.no_bytecode:
        # An installed mlprobe has its .pyc files (pip compiles on install); a checkout with
        # PYTHONDONTWRITEBYTECODE=1 recompiles every module on every run. Cache outside the tree.
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), "mlprobe-bench-pycache")
    timed([sys.executable, "-m", "mlprobe", "scan", "--json"])  # warm caches
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    exe = shutil.which("mlprobe")
    mlprobe_argv = [exe, "scan", "--json"] if exe else [sys.executable, "-m", "mlprobe", "scan", "--json"]

    walls = []
    for _ in range(args.n):
        w, _, _ = timed(mlprobe_argv)
        walls.append(w)
    rss = []
    for _ in range(3):
        _, _, err = timed([sys.executable, "-c", WRAPPER])
        line = [l for l in err.decode().splitlines() if l.startswith("MAXRSS_KB=")]
        rss.append(int(line[-1].split("=")[1]) / 1024 if line else float("nan"))

    print(f"mlprobe scan --json  ({' '.join(mlprobe_argv[:1])}), n={args.n}")
    print(f"  wall median {statistics.median(walls):.3f} s  min {min(walls):.3f}  max {max(walls):.3f}")
    print(f"  peak RSS of the scan process: {max(rss):.1f} MB (max of 3)")

    peer = [sys.executable, "-m", "torch.utils.collect_env"]
    try:
        import importlib.util

        have_torch = importlib.util.find_spec("torch") is not None
    except ImportError:
        have_torch = False
    if not have_torch:
        print("peer: torch is not installed in this Python, so collect_env cannot run (pip install torch)")
        return 0
    pwalls, prss = [], []
    for _ in range(max(3, args.n // 3)):
        start = time.perf_counter()
        proc = subprocess.Popen(peer, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
        _, status, ru = os.wait4(proc.pid, 0)
        pwalls.append(time.perf_counter() - start)
        prss.append(ru.ru_maxrss / 1024)
    print(f"python -m torch.utils.collect_env, n={len(pwalls)}")
    print(f"  wall median {statistics.median(pwalls):.3f} s  min {min(pwalls):.3f}  max {max(pwalls):.3f}")
    print(f"  peak RSS (largest process of the command): {max(prss):.1f} MB")
    ratio = statistics.median(pwalls) / statistics.median(walls)
    print(f"ratio collect_env / mlprobe (medians): {ratio:.1f}x")
    ok = statistics.median(walls) <= 0.35 and ratio >= 7 and max(rss) <= 60
    print(f"targets (median <= 0.35 s, ratio >= 7x, RSS <= 60 MB): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
