"""Fleet figures.

1. `mlprobe fleet merge` of N report files (default 10,000 and 100,000; real reports of 8 fixture
   bundles, copied per node, with driver and torch drift injected on known nodes), against the floor
   measured in the same run on the same files (a fresh process reads every file, then decodes every
   one with the fastest JSON decoder installed): wall time with --jobs 1 and with the default (a
   process per core), its ratio to the floor, and peak memory (measured by the kernel: ru_maxrss of
   the largest process of the command), whether every injected drift was found (and nothing else),
   and whether every group holds exactly one template's nodes. With --ray-workers 1 2 3: the same
   merge with --ray on local clusters of that many one-CPU nodes, and the speed-up over one node.
2. `mlprobe fleet scan` on a 4-node local Ray cluster (ray start --head + 3 ray start --address; the
   nodes replay the H200, RX 6700 XT and Opteron bundles, the head scans this machine), against
   `mlprobe report` of this machine (the same scan + plan on one node), after the cluster is up:
   overhead = fleet scan - single report, median of repeats; beside it Ray's own floor for the same
   round trip with empty tasks (a new worker process per node is most of it). Then the same with
   `--keep-agents 300`: one scan starts an agent per node, the repeats reuse them.

    python benchmarks/bench_fleet.py [--nodes 10000 100000] [--ray-workers 1 2 3] [--skip-merge]
                                     [--skip-scan] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fleet_gen import template_reports, write_fleet  # noqa: E402


def run_child(argv: List[str], env: "dict[str, str] | None" = None) -> Tuple[float, float, "subprocess.CompletedProcess[str]"]:
    """(wall s, peak RSS MiB of this child alone, result): a fresh process per measurement."""
    code = ("import resource,subprocess,sys,time,json;t=time.perf_counter();"
            "p=subprocess.run(sys.argv[1:],capture_output=True,text=True);w=time.perf_counter()-t;"
            "r=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
            "sys.stderr.write(p.stderr);sys.stdout.write(json.dumps({'wall':w,'rss_kib':r,'rc':p.returncode,'out':p.stdout}))")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, env=env)
    info = json.loads(proc.stdout)
    result = subprocess.CompletedProcess(argv, info["rc"], info["out"], proc.stderr)
    return info["wall"], info["rss_kib"] / 1024, result


# The floor of `fleet merge`, in a fresh process: read every file (alone, for the figure), then read and
# decode every file with each JSON decoder installed (msgspec, orjson; stdlib json for comparison up
# to 20,000 files); the floor is the fastest read + decode pass.
FLOOR = """
import json, os, sys, time
folder, with_json = sys.argv[1], sys.argv[2] == "1"
files = sorted(os.path.join(folder, n) for n in os.listdir(folder))


def read(f):
    with open(f, "rb") as fh:
        return fh.read()


t = time.perf_counter()
for f in files:
    read(f)
out = {"read": time.perf_counter() - t}
decoders = {"json": json.loads} if with_json else {}
try:
    import msgspec
    decoders["msgspec"] = msgspec.json.Decoder().decode
except ImportError:
    pass
try:
    import orjson
    decoders["orjson"] = orjson.loads
except ImportError:
    pass
for name, dec in decoders.items():  # each file read and decoded, then dropped (as a merge does)
    t = time.perf_counter()
    for f in files:
        dec(read(f))
    out[name] = time.perf_counter() - t
print(json.dumps(out))
"""


def check_fleet(doc: dict, membership: dict, injected: set) -> str:
    found = {(d["node"], d["field"]) for d in doc["drift"]}
    pure = all(len({membership[n] for n in g["nodes"]}) == 1 for g in doc["groups"])
    ok = pure and found == injected and len(doc["groups"]) == len(set(membership.values()))
    return (f"groups {len(doc['groups'])} (templates {len(set(membership.values()))}), each one template's "
            f"nodes: {pure}; drift {len(found)} found of {len(injected)} injected, all found: "
            f"{found >= injected}, nothing else: {found <= injected} -> {'OK' if ok else 'WRONG'}")


def bench_merge(nodes: int, ray_workers: List[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="mlprobe-fleet-bench-") as tmp:
        folder = Path(tmp) / "reports"
        t = time.perf_counter()
        membership, injected = write_fleet(folder, nodes, templates=template_reports())
        size = sum(f.stat().st_size for f in folder.iterdir())
        print(f"generated {nodes:,} reports ({size / 2**20:,.0f} MiB, {size / nodes / 1024:.1f} KiB each, "
              f"{len(injected)} injected drifts) in {time.perf_counter() - t:.1f} s; {os.cpu_count()} CPUs here")
        wall, rss, proc = run_child([sys.executable, "-c", FLOOR, str(folder), "1" if nodes <= 20_000 else "0"])
        fl = json.loads(proc.stdout)
        floor, fastest = min((v, k) for k, v in fl.items() if k != "read")
        print(f"  floor: read + decode of every file with {fastest}, one process: {floor:.2f} s (reading alone "
              f"{fl['read']:.2f} s; read + decode: " + ", ".join(f"{k} {v:.2f} s" for k, v in fl.items() if k != "read")
              + ")")
        out = Path(tmp) / "fleet.json"
        for jobs in ("1", "auto"):
            argv = [sys.executable, "-m", "mlprobe", "fleet", "merge", str(folder), "-o", str(out)]
            if jobs != "auto":
                argv += ["--jobs", jobs]
            wall, rss, proc = run_child(argv)
            if proc.returncode != 0:
                raise SystemExit(f"fleet merge failed: {proc.stderr[-2000:]}")
            doc = json.loads(out.read_text())
            print(f"  mlprobe fleet merge --jobs {jobs}: {wall:.2f} s = {wall / floor:.2f}x the floor "
                  f"(goal <= 1.5x), peak memory of its largest process {rss:,.0f} MiB (goal <= 512 MiB, "
                  f"limit 1024 MiB)")
            print(f"    {check_fleet(doc, membership, injected)}; fleet report {out.stat().st_size / 2**20:.1f} MiB")
        if ray_workers:
            bench_ray_merge(folder, membership, injected, ray_workers, floor)
        if nodes <= 20_000:
            wall2, rss2, _ = run_child([sys.executable, "-m", "mlprobe", "fleet", "show", str(out), "--html",
                                        str(Path(tmp) / "fleet.html")])
            print(f"  fleet show --html of it: {wall2:.2f} s, peak {rss2:,.0f} MiB")


def bench_ray_merge(folder: Path, membership: dict, injected: set, workers: List[int], floor: float) -> None:
    """`fleet merge --ray` on a local cluster of 1, 2, ... nodes of one CPU each (a head and more
    `ray start --address` nodes on this machine)."""
    from tests.ray_cluster import LocalRayCluster

    env = {k: v for k, v in os.environ.items() if k not in ("MLPROBE_REPLAY", "RAY_ADDRESS")}
    first = None
    for k in workers:
        cluster = LocalRayCluster()
        try:
            cluster.start_head("head")
            for i in range(k - 1):
                cluster.add_node(f"w{i}")
            cluster.wait_nodes(k)
            out = folder.parent / "fleet-ray.json"
            wall, rss, proc = run_child([sys.executable, "-m", "mlprobe", "fleet", "merge", str(folder), "--ray",
                                         "--address", cluster.address, "-o", str(out)], env)
            if proc.returncode != 0:
                raise SystemExit(f"fleet merge --ray failed: {proc.stderr[-2000:]}")
            first = first or wall
            doc = json.loads(out.read_text())
            print(f"  mlprobe fleet merge --ray, {k} node(s) of 1 CPU: {wall:.2f} s ({wall / floor:.2f}x the "
                  f"floor), speed-up over 1 node {first / wall:.2f}x, driver peak {rss:,.0f} MiB")
            print(f"    {check_fleet(doc, membership, injected)}")
        finally:
            cluster.stop()


# A fresh driver: connect, one empty task pinned to each node (a new worker process there), disconnect.
NOOP = """
import sys, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
noop = ray.remote(lambda: 1)
nodes = [n for n in ray.nodes() if n["Alive"]]
ray.get([noop.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
                      num_cpus=0).remote() for n in nodes])
ray.shutdown()
"""


def bench_scan(repeats: int) -> None:
    from tests.ray_cluster import LocalRayCluster

    fixtures = ROOT / "fixtures"
    cluster = LocalRayCluster()
    try:
        t = time.perf_counter()
        cluster.start_head("live")
        for name, bundle in (("h200", "linux-nvidia-h200-mlprobe-capture"),
                             ("rx6700xt", "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"),
                             ("opteron", "linux-nogpu-amd-opteron-8354-no-avx")):
            cluster.add_node(name, {"MLPROBE_REPLAY": str(fixtures / bundle)})
        cluster.wait_nodes(4)
        print(f"4-node local Ray cluster up in {time.perf_counter() - t:.1f} s ({os.cpu_count()} CPUs here)")
        env = {k: v for k, v in os.environ.items() if k not in ("MLPROBE_REPLAY", "RAY_ADDRESS")}
        single: List[float] = []
        fleet: List[float] = []
        floor: List[float] = []
        for _ in range(repeats):
            w, _, p = run_child([sys.executable, "-c", NOOP, cluster.address], env)
            assert p.returncode == 0, p.stderr[-2000:]
            floor.append(w)
            w, _, p = run_child([sys.executable, "-m", "mlprobe", "report", "-o", os.devnull, "--format", "json"], env)
            assert p.returncode == 0, p.stderr
            single.append(w)
            w, _, p = run_child([sys.executable, "-m", "mlprobe", "fleet", "scan", "--address", cluster.address,
                                 "--json", "--timeout", "120"], env)
            assert p.returncode == 0, p.stderr[-2000:]
            assert json.loads(p.stdout)["summary"]["by_status"] == {"ok": 4}
            fleet.append(w)
        s, f = statistics.median(single), statistics.median(fleet)
        print(f"single `mlprobe report` here: median {s:.2f} s ({', '.join(f'{x:.2f}' for x in single)})")
        print(f"`mlprobe fleet scan` of 4 nodes: median {f:.2f} s ({', '.join(f'{x:.2f}' for x in fleet)})")
        fl = statistics.median(floor)
        print(f"Ray's own floor (connect + one empty pinned task per node + disconnect): median {fl:.2f} s "
              f"({', '.join(f'{x:.2f}' for x in floor)})")
        print(f"overhead of fleet scan over a single scan: {f - s:.2f} s (target <= 2 s); "
              f"of which Ray's floor minus a single scan: {fl - s:.2f} s")
        # --keep-agents: the first scan starts one agent per node, the repeats find them by name
        keep = [sys.executable, "-m", "mlprobe", "fleet", "scan", "--address", cluster.address, "--json",
                "--timeout", "120", "--keep-agents", "300"]
        w, _, p = run_child(keep, env)
        assert p.returncode == 0, p.stderr[-2000:]
        warm: List[float] = []
        for _ in range(repeats):
            wt, _, p = run_child(keep, env)
            assert p.returncode == 0, p.stderr[-2000:]
            doc = json.loads(p.stdout)
            assert doc["summary"]["by_status"] == {"ok": 4}
            assert all(n["agent"]["scans"] >= 2 for n in doc["nodes"]), "an agent was not reused"
            warm.append(wt)
        wm = statistics.median(warm)
        print(f"`mlprobe fleet scan --keep-agents 300`: first {w:.2f} s (starts the agents), then median "
              f"{wm:.2f} s ({', '.join(f'{x:.2f}' for x in warm)}): overhead over a single scan "
              f"{wm - s:.2f} s (target <= 2 s)")
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--ray-workers", type=int, nargs="*", default=[],
                    help="also merge on local Ray clusters of these many 1-CPU nodes (e.g. 1 2 3)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-merge", action="store_true")
    ap.add_argument("--skip-scan", action="store_true")
    a = ap.parse_args()
    if not a.skip_merge:
        for n in a.nodes:
            bench_merge(n, a.ray_workers)
    if not a.skip_scan:
        bench_scan(a.repeats)


if __name__ == "__main__":
    main()
