"""`mlprobe scan` starts the nvidia-smi queries the nvidia probe reads at once, before the probes run
(scan/live/_early.py), and LiveHost takes each run over: the GPUs are those a replay of the same
outputs gives, the queries cost the slowest of them instead of their sum, and a run no probe takes
is ended when mlprobe exits."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the fake nvidia-smi is a POSIX shell script")

CASE = FIXTURES / "linux-nvidia-h200-live-khronos-icd"
DELAY = 0.6


def _fake_smi(bin_dir: Path, log: Path, delay: float = DELAY) -> None:
    """An nvidia-smi that answers each query with the fixture's capture of it, after `delay` seconds,
    and logs when each run started and ended."""
    body = f"""#!/bin/sh
echo "start $* $(date +%s.%N)" >> '{log}'
sleep {delay}
case "$*" in
  "-q -x") cat '{CASE / "nvidia-smi-q-x.xml"}' ;;
  --query-gpu=*) cat '{CASE / "nvidia-smi-query.csv"}' ;;
  "topo -m") cat '{CASE / "nvidia-smi-topo-m.txt"}' ;;
  "-q") cat '{CASE / "nvidia-smi-q.txt"}' ;;
  "") cat '{CASE / "nvidia-smi.txt"}' ;;
  *) exit 2 ;;
esac
echo "end $* $(date +%s.%N)" >> '{log}'
"""
    p = bin_dir / "nvidia-smi"
    p.write_text(body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def _gpus(doc: dict) -> list:
    keys = ("name", "pci_bus_id", "uuid", "compute_capability", "memory_bytes", "driver_version", "topology")
    return [{k: g.get(k) for k in keys} for g in doc["gpus"] if "nvidia" in (g.get("sources") or [])]


@pytest.mark.parametrize("argv", [["scan", "--json"], ["-v", "scan", "--json"], ["--quiet", "scan", "--json"]])
def test_nvidia_smi_queries_run_at_once_and_read_as_their_replay(tmp_path: Path, argv: list) -> None:
    """Also with an option before the command (`mlprobe -v scan`: the early start looked at the first
    word only, so a verbose scan, the one that prints timings, ran its queries one after another)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "runs.log"
    _fake_smi(bin_dir, log)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mlprobe"] + argv, capture_output=True, text=True,
                          env=env, timeout=60)
    wall = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr
    live = json.loads(proc.stdout)
    runs = [line.split() for line in log.read_text().splitlines()]
    starts = sorted(float(r[-1]) for r in runs if r[0] == "start")
    ends = sorted(float(r[-1]) for r in runs if r[0] == "end")
    assert len(starts) == 3, runs  # the XML, the CSV and the topology matrix; nothing run twice
    assert starts[-1] < ends[0], "a query waited for another to end"
    assert wall < 3 * DELAY + 1.0, wall
    # The same answer as a replay of the same outputs.
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for name in ("nvidia-smi-q-x.xml", "nvidia-smi-query.csv", "nvidia-smi-topo-m.txt"):
        (bundle / name).write_bytes((CASE / name).read_bytes())
    (bundle / "host.json").write_text(json.dumps({"system": "Linux"}))
    replay = facts_to_report(scan(ReplayHost(bundle)))
    assert _gpus(live) and _gpus(live) == _gpus(replay)
    assert live["runtimes"]["cuda"] == replay["runtimes"]["cuda"]
    timeline = [line for line in proc.stderr.splitlines() if line.startswith("timeline:")]
    assert len(timeline) == (1 if "-v" in argv else 0), proc.stderr


@pytest.mark.slow
def test_an_early_run_no_probe_takes_is_ended_at_exit(tmp_path: Path) -> None:
    """nvidia-smi hangs: the XML query times out, the probe stops, and the CSV and topology runs it
    never asked for are ended when mlprobe exits (no process is left behind)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pids = tmp_path / "pids"
    p = bin_dir / "nvidia-smi"
    p.write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nexec sleep 60\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([sys.executable, "-m", "mlprobe", "scan", "--json"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {p["name"]: p["status"] for p in doc["probes"]}["nvidia"] == "timeout"
    started = [int(x) for x in pids.read_text().split()]
    assert len(started) == 3
    time.sleep(0.2)
    alive = []
    for pid in started:
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except ProcessLookupError:
            pass
    assert alive == []
