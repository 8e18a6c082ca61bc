"""`mlprobe scan --json` (this machine) and `mlprobe plan --replay FIXTURE --json`, this tree against a
base commit (default e6667c2, main before the typed-pipeline redesign), measured in one run: the
base is exported from git into a temporary folder, and each repeat runs base and current back to
back (alternating which goes first), so both see the same machine state. Prints median/min/max
wall-clock seconds per command and the ratio current / base (below 1.00: faster than the base).

    python benchmarks/bench_vs_base.py [--base e6667c2] [--fixture DIR] [-n 15]

Both trees run with this interpreter and its installed dependencies; PYTHONPATH picks the tree.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASE = "e6667c2"
DEFAULT_FIXTURE = ROOT / "fixtures" / "linux-nvidia-h200-mlprobe-capture"


def export(commit: str, dest: Path) -> None:
    """`git archive COMMIT` unpacked into dest (no worktree is registered)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True,
                          timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest)


def timed(tree: Path, args: List[str], cwd: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("MLPROBE_PYTORCH_INDEX_URL", None)
    # An installed package has its .pyc files (pip compiles them); with PYTHONDONTWRITEBYTECODE set,
    # every run would compile every module again and time the compiler, more so for more code.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    # Both trees run from the same empty folder: `-m` puts the working folder first on sys.path, and
    # the live scan's framework inventory reads the distributions there (a checkout's egg-info, say),
    # so running each from its own tree would time the folders, not the code.
    proc = subprocess.run([sys.executable, "-m", "mlprobe", "-q", *args], env=env, cwd=str(cwd),
                          capture_output=True, timeout=300)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: mlprobe {' '.join(args)} exited {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace')[-500:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default=DEFAULT_BASE, help="the commit to compare with (default %(default)s)")
    ap.add_argument("--fixture", default=str(DEFAULT_FIXTURE), help="bundle for the plan command")
    ap.add_argument("-n", type=int, default=15, help="repeats per command and tree (default %(default)s)")
    opts = ap.parse_args()
    commands = {"scan --json": ["scan", "--json"],
                "plan --replay FIXTURE --json": ["plan", "--replay", str(Path(opts.fixture).resolve()), "--json"]}
    with tempfile.TemporaryDirectory(prefix="mlprobe-base-") as tmp, \
            tempfile.TemporaryDirectory(prefix="mlprobe-cwd-") as cwd_name:
        base = Path(tmp)
        cwd = Path(cwd_name)
        export(opts.base, base)
        trees = {"base": base, "current": ROOT}
        times: Dict[str, Dict[str, List[float]]] = {c: {"base": [], "current": []} for c in commands}
        for name, args in commands.items():
            for label in trees:  # warm-up: the first run of each pays for the page cache and .pyc files
                timed(trees[label], args, cwd)
            for i in range(opts.n):
                order = ["base", "current"] if i % 2 == 0 else ["current", "base"]
                for label in order:
                    times[name][label].append(timed(trees[label], args, cwd))
    print(f"base {opts.base} vs current tree, {opts.n} paired runs each, {sys.executable}")
    print(f"{'command':32} {'tree':8} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, by in times.items():
        for label in ("base", "current"):
            xs = by[label]
            print(f"{name:32} {label:8} {statistics.median(xs):9.3f} {min(xs):7.3f} {max(xs):7.3f}")
        ratio = statistics.median(by["current"]) / statistics.median(by["base"])
        print(f"{name:32} {'ratio':8} {ratio:9.2f}  (current / base median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
