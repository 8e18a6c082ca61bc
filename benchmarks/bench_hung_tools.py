"""When every tool hangs (fake nvidia-smi, rocminfo, sycl-ls, amd-smi, clinfo … first on PATH, each a
script whose child sleeps): when scan, plan, doctor and report write their output and when they exit,
against the probe deadline, all measured in the same run; and whether any tool's process survives.

    python benchmarks/bench_hung_tools.py [--deadline 30] [--commands scan,plan,doctor,report] [--peer TREE]

--peer TREE: the same runs with another checkout's mlprobe (its folder put first on PYTHONPATH), e.g.
an older one, as the peer of this one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.hung_tools import make_hung_tools, run_with_deadline, survivors  # noqa: E402

ARGV = {"scan": ["scan", "--json"], "plan": ["plan", "--json"], "doctor": ["doctor", "--json"],
        "report": ["report"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deadline", type=float, default=30.0, help="the probe deadline (mlprobe's is 30 s)")
    ap.add_argument("--commands", default="scan,plan,doctor,report")
    ap.add_argument("--peer", metavar="TREE", help="another checkout of mlprobe, measured in the same run")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    trees = [("this", here)] + ([("peer", os.path.abspath(args.peer))] if args.peer else [])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "bin"
        names = make_hung_tools(folder)
        print(f"{len(names)} hung tools first on PATH; probe deadline {args.deadline:g} s")
        for cmd in args.commands.split(","):
            for label, tree in trees:
                env = dict(os.environ, PYTHONPATH=tree)
                out_at, exit_at, rc, _ = run_with_deadline(ARGV[cmd], folder, args.deadline, env)
                time.sleep(0.2)
                left = survivors(folder)
                print(f"{label:<5} mlprobe {' '.join(ARGV[cmd]):<14} output written at {out_at:6.2f} s, exited at "
                      f"{exit_at:6.2f} s (deadline + {exit_at - args.deadline:5.2f} s, {exit_at - out_at:4.2f} s "
                      f"after its output), exit {rc}, {len(left)} tool process(es) left")
                for pid in left:  # ended here, so that the next run starts clean
                    try:
                        os.kill(int(pid.split(":")[0]), 9)
                    except OSError:
                        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
