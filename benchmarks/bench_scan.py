"""`mlprobe scan --json` against its floors and its peer, paired in one run.

Each round runs, back to back, every command below once (in a rotating order, so a busy machine hurts
all alike): the scan, the tools it is made of measured alone (its floors: a bare Python, importing
mlprobe's CLI, pyopencl listing every platform and device in a fresh Python, mlprobe's own OpenCL
child, clinfo -l, each nvidia-smi query the scan makes, NVML through ctypes), and
`python -m torch.utils.collect_env` (the peer, every third round). Prints median/min per command,
the scan minus its slowest floor, and the ratio collect_env / scan.

    python benchmarks/bench_scan.py [-n 15] [--json FILE]

Goals (issue "Speed at the floor"): on a 2-core machine with PoCL only, scan <= 0.20 s and >= 10x
collect_env; where NVIDIA's OpenCL is there, scan <= the OpenCL floor (pyopencl in a fresh Python)
+ 0.10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ)
PYOPENCL_ALL = ("import pyopencl as cl\n"
                "for p in cl.get_platforms():\n"
                "    [d.name for d in p.get_devices()]\n")
NVML = ("import ctypes\n"
        "lib = ctypes.CDLL('libnvidia-ml.so.1')\n"
        "assert lib.nvmlInit_v2() == 0\n"
        "n = ctypes.c_uint(0)\n"
        "lib.nvmlDeviceGetCount_v2(ctypes.byref(n))\n"
        "lib.nvmlShutdown()\n")


SAME_PLATFORMS = "floor: pyopencl, the platforms clinfo lists (fresh Python)"


def same_platforms_env(base: Dict[str, str]) -> Dict[str, str]:
    """The environment with OCL_ICD_VENDORS pointing at a folder holding the ICDs OCL_ICD_FILENAMES and
    the vendors folder name (written by mlprobe's OpenCL child, `--vendors-dir`)."""
    import tempfile

    from mlprobe.scan.live import _early

    folder = tempfile.mkdtemp(prefix="bench-vendors-")
    subprocess.run([sys.executable, _early.CHILD, "--vendors-dir", folder], stdout=subprocess.DEVNULL,
                   check=True, timeout=60)
    return dict(base, OCL_ICD_VENDORS=folder)


def commands() -> Dict[str, Optional[List[str]]]:
    py = sys.executable
    exe = shutil.which("mlprobe")
    scan = [exe, "scan", "--json"] if exe and not os.environ.get("BENCH_MODULE") else [py, "-m", "mlprobe", "scan", "--json"]
    sys.path.insert(0, ROOT)
    from mlprobe.scan.capture import SPECS
    from mlprobe.scan.live import _early

    out: Dict[str, Optional[List[str]]] = {
        "mlprobe scan --json": scan,
        "floor: python -c pass": [py, "-c", "pass"],
        "floor: import mlprobe.cli": [py, "-c", "import mlprobe.cli"],
        "floor: pyopencl, all platforms and devices (fresh Python)": [py, "-c", PYOPENCL_ALL],
        # Where OCL_ICD_FILENAMES names an ICD (NVIDIA's, in containers), pyopencl's bundled loader
        # does not read it and lists fewer platforms than clinfo and mlprobe: this floor gives it a
        # vendors folder with those ICDs too (OCL_ICD_VENDORS), so that it does the same work
        SAME_PLATFORMS: [py, "-c", PYOPENCL_ALL] if os.environ.get("OCL_ICD_FILENAMES") else None,
        "floor: mlprobe's OpenCL child alone": _early.child_argv(),
        "floor: mlprobe's OpenCL child, until its answer": _early.child_argv(),
        "floor: clinfo -l": ["clinfo", "-l"] if shutil.which("clinfo") else None,
    }
    smi = shutil.which("nvidia-smi")
    for name in ("nvidia-smi-q-x.xml", "nvidia-smi-query.csv", "nvidia-smi-topo-m.txt"):
        argv = SPECS[name].argv
        out[f"floor: {' '.join(argv or ())}"] = [smi] + list(argv[1:]) if smi and argv else None
    out["floor: NVML through ctypes (init + device count)"] = [py, "-c", NVML] if smi else None
    return out


def until_answer(argv: List[str], env: Dict[str, str]) -> Optional[float]:
    """Until the child's output closes (what the scan waits for), not until it exits."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    proc.stdout.read()
    wall = time.perf_counter() - start
    proc.wait()
    return wall if proc.returncode == 0 else None


def timed(argv: List[str], env: Dict[str, str], name: str = "") -> Optional[float]:
    if name.endswith("until its answer"):
        return until_answer(argv, env)
    # Popen.wait() without a timeout blocks in waitpid and wakes at the exit; with a timeout (what
    # subprocess.run(timeout=...) uses) it polls, up to 50 ms apart, which rounds every figure up.
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    guard = threading.Timer(300, proc.kill)
    guard.start()
    try:
        code = proc.wait()
    finally:
        guard.cancel()
    wall = time.perf_counter() - start
    return wall if code == 0 else None


def child_phases(env: Optional[Dict[str, str]], runs: int = 7) -> Dict[str, float]:
    """Where the OpenCL child's time goes (MLPROBE_OPENCL_TIMES=1): median seconds per phase, and
    the rest of its wall time (the interpreter's start and exit)."""
    if env is None:
        return {}
    from mlprobe.scan.live import _early

    env = dict(env, MLPROBE_OPENCL_TIMES="1")
    got: Dict[str, List[float]] = {}
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(_early.child_argv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                              timeout=300)
        wall = time.perf_counter() - start
        line = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        try:
            phases = json.loads(line[0])["phases"]
        except (ValueError, KeyError, TypeError):
            continue
        inside = 0.0
        for label, secs in phases:
            got.setdefault(label, []).append(secs)
            inside += secs
        got.setdefault("interpreter start and exit (wall - phases)", []).append(wall - inside)
        got.setdefault("wall", []).append(wall)
    med = {k: statistics.median(v) for k, v in got.items()}
    if med:
        print(f"mlprobe's OpenCL child, where its time goes (median of {runs}, MLPROBE_OPENCL_TIMES=1):")
        for k, v in med.items():
            print(f"  {k:58} {v:7.3f} s")
    return med


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=15, help="rounds (default %(default)s)")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE as it is (every run compiles mlprobe from source)")
    args = ap.parse_args()
    if not args.no_bytecode:
        # An installed mlprobe has its .pyc files (pip compiles on install); a checkout with
        # PYTHONDONTWRITEBYTECODE=1 recompiles every module on every run. Cache outside the tree.
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), "mlprobe-bench-pycache")
    from mlprobe.scan.live import _early

    cmds = {k: v for k, v in commands().items() if v}
    envs = {k: (dict(_early.child_env(), **{x: ENV[x] for x in ("PYTHONPYCACHEPREFIX",) if x in ENV})
                if "OpenCL child" in k else ENV) for k in cmds}
    if SAME_PLATFORMS in cmds:
        envs[SAME_PLATFORMS] = same_platforms_env(ENV)
    import importlib.util

    peer = [sys.executable, "-m", "torch.utils.collect_env"] if importlib.util.find_spec("torch") else None
    for k, argv in cmds.items():  # warm the page cache and the .pyc files
        timed(argv, envs[k], k)
    times: Dict[str, List[float]] = {k: [] for k in cmds}
    failed: Dict[str, int] = {k: 0 for k in cmds}
    peer_times: List[float] = []
    names = list(cmds)
    for i in range(args.n):
        order = names[i % len(names):] + names[:i % len(names)]
        for k in order:
            t = timed(cmds[k], envs[k], k)
            if t is None:
                failed[k] += 1
            else:
                times[k].append(t)
        if peer and i % 3 == 0:
            t = timed(peer, ENV)
            if t is not None:
                peer_times.append(t)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.1f}, {args.n} rounds, {sys.executable}")
    print(f"{'command':60} {'median s':>9} {'min s':>7}")
    med: Dict[str, float] = {}
    for k in names:
        xs = times[k]
        if not xs:
            print(f"{k:60} {'failed':>9}")
            continue
        med[k] = statistics.median(xs)
        print(f"{k:60} {med[k]:9.3f} {min(xs):7.3f}" + (f"  ({failed[k]} failed)" if failed[k] else ""))
    scan = med.get("mlprobe scan --json")
    sources = {k: v for k, v in med.items() if k.startswith("floor:") and "python -c pass" not in k
               and "import mlprobe" not in k and "fresh Python" not in k and "NVML" not in k
               and "until its answer" not in k}
    ocl_floor = med.get(SAME_PLATFORMS) or med.get("floor: pyopencl, all platforms and devices (fresh Python)")
    out: Dict[str, object] = {"medians": med, "cpus": os.cpu_count(), "load": load, "rounds": args.n}
    if scan and sources:
        slowest = max(sources, key=lambda k: sources[k])
        print(f"scan - its slowest source alone ({slowest[7:]}): {scan - sources[slowest]:+.3f} s")
        out["slowest_source"] = slowest
    if scan and ocl_floor:
        which = "the platforms clinfo lists" if SAME_PLATFORMS in med else "all platforms it sees"
        print(f"scan - the OpenCL floor (pyopencl in a fresh Python, {which}): {scan - ocl_floor:+.3f} s "
              f"(goal on a machine with NVIDIA's OpenCL: <= +0.10 s)")
    if scan and peer_times:
        pm = statistics.median(peer_times)
        ratio = pm / scan
        print(f"peer: python -m torch.utils.collect_env median {pm:.3f} s (n={len(peer_times)}); "
              f"ratio collect_env / scan {ratio:.1f}x (goal >= 10x)")
        out.update(collect_env=pm, ratio=ratio)
    if scan:
        print(f"goal here (2 cores, PoCL only): scan <= 0.20 s: {'met' if scan <= 0.20 else 'NOT met'}")
    phases = child_phases(envs.get("floor: mlprobe's OpenCL child alone"))
    if phases:
        out["opencl_child_phases"] = phases
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
