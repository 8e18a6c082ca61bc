"""Is `mlprobe verify`'s torch CPU speed figure honest? Compare it with a hand-written training loop
of the same model (Keras-MNIST CNN, batch 128, Adadelta), measured in the same run, interleaved so
that a busy machine hurts both alike. Prints both figures, their ratio, and verify's wall time.

    python benchmarks/bench_verify_cpu.py [--rounds 5] [--python PATH] [--threads N]

The hand-written loop runs in its own child process too (a fresh interpreter, like verify's), just
before and just after each verify run (their mean is the round's figure, so drifting load cancels).
Both report the median throughput over timed chunks of steps (verify: 7 repeats of K steps; here:
7 chunks of 5 steps), so the comparison is of the harness (verify's model, data, synchronisation and
bookkeeping), not of two statistics that react differently to a busy machine.
Acceptance: ratio within 0.90-1.10; whole verify (import included) <= 20 s on the 2-core machine.
The ratio reported is the median of the per-round ratios (each round measures verify, then the hand
loop, seconds apart). On a machine shared with other work, `--threads 1` (OMP_NUM_THREADS=1 for
both) keeps one busy core from stalling torch's thread team, which otherwise swamps the comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from mlprobe.verify import run_verify

HAND_LOOP = r'''
import json, time
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
    nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))
opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.95, eps=1e-7)
x = torch.rand(128, 1, 28, 28)
y = torch.randint(0, 10, (128,))
for _ in range(3):  # warm-up
    opt.zero_grad(); F.cross_entropy(model(x), y).backward(); opt.step()
rates = []
for _ in range(CHUNKS):
    t0 = time.perf_counter()
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    rates.append(STEPS * 128 / (time.perf_counter() - t0))
rates.sort()
print(json.dumps({"images_per_s": rates[len(rates) // 2], "chunks": rates, "final_loss": loss.item()}))
'''


def hand_loop(python: str, steps: int, chunks: int) -> float:
    code = HAND_LOOP.replace("STEPS", str(steps)).replace("CHUNKS", str(chunks))
    out = subprocess.run([python, "-c", code], capture_output=True,
                         text=True, check=True, timeout=600).stdout
    return float(json.loads(out.strip().splitlines()[-1])["images_per_s"])


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for both sides")
    ap.add_argument("--steps", type=int, default=5, help="steps per timed chunk of the hand-written loop")
    ap.add_argument("--chunks", type=int, default=7, help="timed chunks of the hand-written loop (median)")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # inherited by verify's child and the hand loop
    load0 = _load()
    v_ips, h_ips, walls, ratios = [], [], [], []
    for i in range(args.rounds):
        h_before = hand_loop(args.python, args.steps, args.chunks)
        t0 = time.monotonic()
        doc = run_verify(python=args.python, framework="torch", device="cpu", cpu_peers=False)
        walls.append(time.monotonic() - t0)
        rec = next(r for r in doc["results"] if r["device"] == "cpu")
        if rec["verdict"] != "CPU":
            print(f"verify failed: {rec['verdict']}: {rec['reason']}")
            return 1
        v = rec["speed"]["images_per_s"]
        h_after = hand_loop(args.python, args.steps, args.chunks)
        h = (h_before + h_after) / 2  # the hand loop runs just before and just after verify: load drifts
        v_ips.append(v)
        h_ips.append(h)
        ratios.append(v / h)
        print(f"round {i + 1}: verify {v:8.1f} images/s   hand-written loop {h:8.1f} images/s "
              f"({h_before:.0f} before, {h_after:.0f} after)   "
              f"ratio {v / h:.3f}   verify wall {walls[-1]:.1f} s "
              f"(correct {rec['correctness']['passed']}, learned {rec['learning']['accuracy']:.2f} "
              f"in {rec['learning']['seconds']} s)")
    mv, mh, mr = statistics.median(v_ips), statistics.median(h_ips), statistics.median(ratios)
    print(f"threads: {os.environ.get('OMP_NUM_THREADS', 'default')}; load average before/after: "
          f"{load0} / {_load()}")
    print(f"median: verify {mv:.1f} images/s, hand-written {mh:.1f} images/s, median per-round ratio "
          f"{mr:.3f} ({'within' if 0.9 <= mr <= 1.1 else 'OUTSIDE'} 10%); verify wall median "
          f"{statistics.median(walls):.1f} s (max {max(walls):.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
