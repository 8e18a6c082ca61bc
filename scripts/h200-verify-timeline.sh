#!/usr/bin/env bash
# Where verify's time goes on the GPU machine, in one device call (issue "Speed at the floor"):
#   1. benchmarks/bench_scan.py: the scan against its floors and collect_env; bench_scan_exit.py: the
#      scan's first byte and its exit; the scan's -v timeline;
#   2. `mlprobe -v verify` timelines (each line says when it came): torch and torch+jax, twice each;
#   3. benchmarks/bench_verify_speed.py, VERIFY_ROUNDS (3) rounds of torch and torch,jax: verify's
#      figures against the hand-written loop of the same CNN measured in the same run;
#   4. PlaidML, while the call has time (PLAIDML_BEFORE_S): the bundle made here installed offline
#      into the image's venv (scripts/h200-offline-torch-venv.sh), then `-v verify --framework plaidml`.
#   OUT=DIR scripts/h200-verify-timeline.sh   (everything packed into OUT/timeline.tgz)
# Needs .whl/h200 (mlprobe's wheel and its dependencies) and build/h200-plaidml (the bundle).
set -u
cd "$(dirname "$0")/.."
out="${OUT:-h200-timeline-out}"
w="$out/w"
mkdir -p "$w"
PY=/opt/torch/.venv/bin/python3
site=/tmp/mlprobe-site
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" \
  $(ls .whl/h200/*.whl | grep -v -e '/mlprobe-' -e '/numpy-') >/dev/null 2>&1 || echo "installing the dependencies failed"
export PYTHONPATH="$PWD:$site" PYTHONUNBUFFERED=1 BENCH_MODULE=1
log="$w/log.txt"
say() { echo "== $* ($(date +%T))" | tee -a "$log"; }
say "machine: $(nproc) CPUs; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
timed() {  # name, then the command
  local name="$1"; shift
  local t0; t0=$(date +%s.%N)
  "$@" > "$w/$name.json" 2> "$w/$name.stderr.txt"
  local rc=$?
  say "$name: exit $rc in $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
  grep -E "^verify \+" "$w/$name.stderr.txt" | tee -a "$log"
}
if [ "${SCAN:-1}" = 1 ]; then
  say "1. scan against its floors"
  timeout 150 "$PY" benchmarks/bench_scan.py -n "${SCAN_N:-11}" --json "$w/bench_scan.json" 2>&1 | tail -32 | tee -a "$log"
  timeout 60 "$PY" benchmarks/bench_scan_exit.py -n 9 -- "$PY" -m mlprobe scan --json 2>&1 | tee -a "$log"
  "$PY" -m mlprobe -v scan --json > "$w/scan.json" 2> "$w/scan-v.txt"; grep -i timeline "$w/scan-v.txt" | tee -a "$log"
fi
say "2. verify timelines"
for round in 1 2; do
  timed "verify-torch-$round" timeout 120 "$PY" -m mlprobe -v verify --framework torch --json
  timed "verify-torch-jax-$round" timeout 120 "$PY" -m mlprobe -v verify --json
done
if [ "${UNSPLIT:-0}" = 1 ]; then  # the same with one child per framework (MLPROBE_VERIFY_SPLIT=0), once
  timed "verify-torch-unsplit" env MLPROBE_VERIFY_SPLIT=0 timeout 120 "$PY" -m mlprobe -v verify --framework torch --json
  timed "verify-torch-jax-unsplit" env MLPROBE_VERIFY_SPLIT=0 timeout 120 "$PY" -m mlprobe -v verify --json
fi
say "3. verify against the hand-written loop"
timeout 300 "$PY" benchmarks/bench_verify_speed.py --rounds "${VERIFY_ROUNDS:-3}" --sets torch torch,jax --python "$PY" \
  --json "$w/bench_verify.json" 2>&1 | tail -25 | tee -a "$log"
if [ "$SECONDS" -lt "${PLAIDML_BEFORE_S:-330}" ]; then
  say "4. PlaidML from the offline bundle"
  OUT="$w/plaidml" timeout 150 bash scripts/h200-offline-torch-venv.sh 2>&1 | tail -8 | tee -a "$log"
  grep -E "^verify \+" "$w/plaidml/w/verify-plaidml-again.stderr.txt" 2>/dev/null | tee -a "$log"
else
  say "4. PlaidML: skipped (${SECONDS} s gone)"
fi
say "done"
tar czf "$out/timeline.tgz" -C "$w" .
