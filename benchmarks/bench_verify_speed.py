"""`mlprobe verify` wall time, and its speed figures against a hand-written loop of the same CNN,
measured in the same run.

Each round runs `mlprobe verify --framework F --json` (the whole command, as a user waits for it) for
each framework set asked for, then, right after, the hand-written torch training loop on every
torch device verify measured (same model, batch 128, Adadelta; warm-up, then the median of timed
chunks), and the floors: a fresh Python importing each framework (the least any verify must pay).
Prints per round and as medians: verify's wall time, its floor, verify's images/s, the hand loop's,
and their ratio (acceptance: 0.90-1.10).

    python benchmarks/bench_verify_speed.py [--rounds 3] [--sets torch torch,jax] [--python PATH]
                                            [--json FILE] [--serial]

--serial sets MLPROBE_VERIFY_SERIAL=1 (one child after the other, the old schedule) for comparison.
Goals (issue "Speed at the floor"): torch on a 2-core CPU machine <= 12 s; on the H200 machine
torch <= 12 s, torch + jax <= 20 s, PlaidML with its GPU <= 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HAND_LOOP = r'''
import json, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

dev = torch.device(sys.argv[1])
def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
    nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10)).to(dev)
opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.95, eps=1e-7)
x = torch.rand(128, 1, 28, 28).to(dev)
y = torch.randint(0, 10, (128,)).to(dev)
def step():
    opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward(); opt.step(); return loss
for _ in range(5):  # warm-up
    step()
sync()
t0 = time.perf_counter(); step(); sync(); step_s = time.perf_counter() - t0
k = max(1, min(500, int(0.25 / max(step_s, 1e-6)) + 1))  # ~0.25 s per timed chunk, like verify
rates = []
for _ in range(7):
    t0 = time.perf_counter()
    for _ in range(k):
        v = step()
    sync()
    rates.append(k * 128 / (time.perf_counter() - t0))
rates.sort()
print(json.dumps({"images_per_s": rates[len(rates) // 2], "chunks": rates, "steps_per_chunk": k}))
'''


def run(argv: List[str], env: Dict[str, str], timeout: float = 900) -> "tuple[float, subprocess.CompletedProcess[str]]":
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    return time.perf_counter() - t0, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sets", nargs="+", default=["torch"], help="framework sets, e.g. torch torch,jax plaidml")
    ap.add_argument("--python", default=sys.executable, help="the interpreter to verify")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--serial", action="store_true", help="MLPROBE_VERIFY_SERIAL=1: one child after the other")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if args.serial:
        env["MLPROBE_VERIFY_SERIAL"] = "1"
    rows: List[Dict[str, Any]] = []
    for i in range(args.rounds):
        for fset in args.sets:
            fws = fset.split(",")
            argv = [sys.executable, "-m", "mlprobe", "-q", "verify", "--json", "--python", args.python]
            if len(fws) == 1:
                argv += ["--framework", fws[0]]
            wall, proc = run(argv, env)
            try:
                doc = json.loads(proc.stdout)
            except ValueError:
                print(f"round {i + 1} {fset}: verify printed no JSON (exit {proc.returncode}): {proc.stderr[-400:]}")
                continue
            got = {f["name"] for f in doc["frameworks"] if f.get("status") == "verified"}
            if len(fws) > 1 and not set(fws) <= got:
                print(f"round {i + 1} {fset}: verified {sorted(got)} only")
            row: Dict[str, Any] = {"round": i + 1, "set": fset, "verify_wall_s": wall, "doc_wall_s": doc.get("wall_s"),
                                   "devices": {}}
            floor = 0.0
            for fw in fws:
                t, p = run([args.python, "-c", f"import {fw}"], env)
                row[f"floor_import_{fw}_s"] = t if p.returncode == 0 else None
                floor = max(floor, t if p.returncode == 0 else 0.0)
            row["floor_s"] = floor
            for r in doc["results"]:
                sp = r.get("speed") or {}
                if not sp.get("images_per_s"):
                    continue
                d = {"verify_ips": sp["images_per_s"], "spread": sp.get("spread"), "repeats": sp.get("repeats"),
                     "stopped": sp.get("stopped"), "verdict": r["verdict"],
                     "stage_s": {st: (r.get(st) or {}).get("stage_s") for st in ("correctness", "learning", "speed")}}
                if r["framework"] == "torch" and r["device"] in ("cpu", "cuda:0"):
                    t, p = run([args.python, "-c", HAND_LOOP, r["device"]], env)
                    if p.returncode == 0:
                        hand = json.loads(p.stdout.strip().splitlines()[-1])["images_per_s"]
                        d.update(hand_ips=hand, ratio=sp["images_per_s"] / hand)
                row["devices"][f"{r['framework']} {r['device']}"] = d
            for pe in doc.get("cpu_peers") or []:
                row["devices"][f"peer {pe['framework']} cpu"] = {"verify_ips": pe["images_per_s"], "spread": pe.get("spread")}
            rows.append(row)
            devs = "; ".join(f"{k} {v['verify_ips']:.0f} img/s (spread {100 * (v.get('spread') or 0):.1f}%, "
                             f"n={v.get('repeats')}, {v.get('stopped')})"
                             + (f" vs hand {v['hand_ips']:.0f} -> {v['ratio']:.3f}" if "ratio" in v else "")
                             for k, v in row["devices"].items())
            print(f"round {i + 1} {fset}: verify {wall:.1f} s (floor: import {floor:.1f} s); {devs}", flush=True)
            stages = "; ".join(f"{k} " + "/".join(f"{st[0]} {v:.1f}" for st, v in d["stage_s"].items() if v is not None)
                               for k, d in row["devices"].items() if d.get("stage_s"))
            print(f"  stage seconds (correctness/learning/speed): {stages}", flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.1f}, {'serial' if args.serial else 'overlapped'} schedule")
    goals = {"torch": 12.0, "torch,jax": 20.0, "plaidml": 30.0}
    for fset in args.sets:
        rs = [r for r in rows if r["set"] == fset]
        if not rs:
            continue
        w = statistics.median(r["verify_wall_s"] for r in rs)
        fl = statistics.median(r["floor_s"] for r in rs)
        line = f"median {fset}: verify {w:.1f} s, floor (framework import) {fl:.1f} s, ratio {w / fl if fl else float('nan'):.1f}x"
        ratios = [d["ratio"] for r in rs for d in r["devices"].values() if "ratio" in d]
        if ratios:
            mr = statistics.median(ratios)
            line += f"; verify / hand-written loop {mr:.3f} ({'within' if 0.9 <= mr <= 1.1 else 'OUTSIDE'} 10%)"
        if fset in goals:
            line += f"; goal <= {goals[fset]:.0f} s: {'met' if w <= goals[fset] else 'NOT met'}"
        print(line)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "load": load, "cpus": os.cpu_count(), "serial": args.serial}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
