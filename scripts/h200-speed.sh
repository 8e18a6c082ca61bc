#!/usr/bin/env bash
# The speed benchmarks on the H200 machine, in one go (issue "Speed at the floor"):
#   1. benchmarks/bench_scan.py: `mlprobe scan --json` against its floors (pyopencl in a fresh Python,
#      mlprobe's OpenCL child alone, clinfo -l, each nvidia-smi query, NVML through ctypes) and
#      collect_env, paired in one run; plus `scan -v` probe timings and the live scan's JSON.
#   2. diagnostics for the scan's slowest part: the OpenCL child alone and while the three nvidia-smi
#      queries run (does NVIDIA's driver serialise them?), the queries one after another and at once.
#   3. benchmarks/bench_verify_speed.py: verify torch, torch+jax (and PlaidML where a venv has it),
#      overlapped and serial (MLPROBE_VERIFY_SERIAL=1), each device's figure against a hand-written
#      torch loop of the same CNN measured in the same run.
#
#   OUT=/some/dir scripts/h200-speed.sh           (default OUT: ./h200-speed-out)
#   SCAN_N=15 VERIFY_ROUNDS=2 SERIAL=1            (rounds of the scan and verify benchmarks; SERIAL=0 skips
#                                                  the serial-schedule comparison)
#   PY=/opt/torch/.venv/bin/python3               (torch 2.11 cu130 + jax 0.11.2 CUDA 13; the default)
#   PLAIDML_PY=/path/to/plaidml-venv/bin/python   (optional: the PlaidML part runs only with it, or
#                                                  when ~/venvs/plaidml/bin/python exists)
# Needs only this checkout (mlprobe runs from it through PYTHONPATH); writes under $OUT only.
set -u
cd "$(dirname "$0")/.."
out="${OUT:-h200-speed-out}"
mkdir -p "$out"
PY="${PY:-/opt/torch/.venv/bin/python3}"
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export BENCH_MODULE=1  # time `python -m mlprobe` from this checkout, not an installed mlprobe
log="$out/log.txt"
: > "$log"
say() { echo "== $*" | tee -a "$log"; }

say "machine: $(nproc) CPUs; $(nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader 2>&1 | head -2)"
say "python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1))"
say "CPUs: nproc $(nproc), cgroup cpu.max $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo -); $("$PY" -c 'import os, torch; print("os.cpu_count", os.cpu_count(), "affinity", len(os.sched_getaffinity(0)), "torch threads", torch.get_num_threads(), "interop", torch.get_num_interop_threads())' 2>&1 | tail -1)"

say "1. scan against its floors and collect_env"
timeout 900 "$PY" benchmarks/bench_scan.py -n "${SCAN_N:-15}" --json "$out/bench_scan.json" 2>&1 | tee -a "$log"
"$PY" -m mlprobe -v scan --json > "$out/scan.json" 2> "$out/scan-v.txt"
cat "$out/scan-v.txt" >> "$log"

say "2. the OpenCL child with and without the nvidia-smi queries beside it"
timeout 300 "$PY" - <<'PYEOF' 2>&1 | tee -a "$log"
import shutil, statistics, subprocess, time
from mlprobe.scan.live import _early
from mlprobe.scan.capture import EARLY, SPECS
smi = shutil.which("nvidia-smi")
queries = [[smi] + list(SPECS[n].argv[1:]) for n in EARLY] if smi else []
def child():
    return subprocess.Popen(_early.child_argv(), env=_early.child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def run_all(procs):
    t0 = time.perf_counter(); ends = []
    for p in procs:
        p.wait(); ends.append(time.perf_counter() - t0)
    return ends
rows = {"child alone": [], "queries one after another": [], "queries at once": [], "child + queries at once (child)": [],
        "child + queries at once (all)": []}
for _ in range(9):
    rows["child alone"].append(run_all([child()])[0])
    if queries:
        t0 = time.perf_counter()
        for q in queries:
            subprocess.run(q, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows["queries one after another"].append(time.perf_counter() - t0)
        rows["queries at once"].append(max(run_all([subprocess.Popen(q, stdout=subprocess.DEVNULL) for q in queries])))
        ends = run_all([child()] + [subprocess.Popen(q, stdout=subprocess.DEVNULL) for q in queries])
        rows["child + queries at once (child)"].append(ends[0]); rows["child + queries at once (all)"].append(max(ends))
for k, v in rows.items():
    if v:
        print(f"{k:36} median {statistics.median(v):.3f} s  min {min(v):.3f}")
PYEOF

say "3. verify: overlapped, then serial, with the hand-written loop in the same run"
timeout 1500 "$PY" benchmarks/bench_verify_speed.py --rounds "${VERIFY_ROUNDS:-2}" --sets torch torch,jax --python "$PY" \
  --json "$out/bench_verify.json" 2>&1 | tee -a "$log"
if [ "${SERIAL:-1}" = 1 ]; then
  timeout 900 "$PY" benchmarks/bench_verify_speed.py --rounds 1 --sets torch torch,jax --python "$PY" --serial \
    --json "$out/bench_verify_serial.json" 2>&1 | tee -a "$log"
fi
"$PY" -m mlprobe -q verify --json > "$out/verify-all.json" 2>> "$log"

PLAIDML_PY="${PLAIDML_PY:-$HOME/venvs/plaidml/bin/python}"
if [ -x "$PLAIDML_PY" ] && "$PLAIDML_PY" -c "import plaidml" >/dev/null 2>&1; then
  say "4. PlaidML ($PLAIDML_PY)"
  timeout 900 "$PY" benchmarks/bench_verify_speed.py --rounds 1 --sets plaidml --python "$PLAIDML_PY" \
    --json "$out/bench_verify_plaidml.json" 2>&1 | tee -a "$log"
else
  say "4. PlaidML: skipped (no interpreter with plaidml at ${PLAIDML_PY}; set PLAIDML_PY)"
fi
say "done: $(ls "$out" | tr '\n' ' ')"
