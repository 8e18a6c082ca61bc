#!/usr/bin/env bash
# `mlprobe doctor` live on the H200 machine, in one command:
#   1. doctor --python IMAGE_PY (text and --json): must find nothing blocking (exit 0);
#   2. the same with CUDA_VISIBLE_DEVICES="": must block (exit 1) and name that variable;
#   3. mlprobe capture, plain and with CUDA_VISIBLE_DEVICES="" (bundles for fixtures, with the new
#      captures: ls-l-dev.txt, id.txt, ldconfig-p.txt, opencl-icd.json, framework-devices.json),
#      and doctor --replay of each, which must give the same verdicts;
#   4. CHECKS.txt (PASS/FAIL per expectation) and timings.txt (seconds per step).
#
#   scripts/h200-doctor.sh [OUT_DIR]        (default: $OUT, else ./h200-doctor-out)
#   PY=/path/to/python scripts/h200-doctor.sh   (default /opt/torch/.venv/bin/python3)
#
# Needs only this repository (mlprobe runs from the tree through PYTHONPATH) and the image's Python.
# The two bundles are packed into one captures.tar.gz so few files come back.
set -u
cd "$(dirname "$0")/.."
out="${1:-${OUT:-h200-doctor-out}}"
mkdir -p "$out"
PY="${PY:-/opt/torch/.venv/bin/python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
log="$out/log.txt"; : > "$log"
times="$out/timings.txt"; : > "$times"
checks="$out/CHECKS.txt"; : > "$checks"
caps="$(mktemp -d)"

step() {  # step NAME OUTFILE ARGV...: stdout to OUTFILE, stderr to the log, exit status and seconds recorded
  local name="$1" file="$2"; shift 2
  echo "== $name: $*" >> "$log"
  local t0="$EPOCHREALTIME"
  "$@" > "$file" 2>> "$log"
  local rc=$?
  local t1="$EPOCHREALTIME"
  printf '%s exit=%s seconds=%s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')" >> "$times"
  return $rc
}
expect() {  # expect WHAT CONDITION...
  local what="$1"; shift
  if "$@"; then echo "PASS $what" >> "$checks"; else echo "FAIL $what" >> "$checks"; fi
}

"$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())' \
  > "$out/python.txt" 2>> "$log"

step doctor "$out/doctor.txt" "$PY" -m mlprobe doctor -v --python "$PY"; rc=$?
expect "doctor --python $PY exits 0 (nothing blocks)" test "$rc" -eq 0
expect "doctor says nothing blocks" grep -q "Nothing blocks" "$out/doctor.txt"
expect "doctor lists the H100 or H200 as torch's device" grep -q -E "cuda:0 NVIDIA H(1|2)00" "$out/doctor.txt"

step doctor-json "$out/doctor.json" "$PY" -m mlprobe doctor --json --python "$PY"; rc=$?
expect "doctor --json exits 0" test "$rc" -eq 0
step schema "$out/doctor.schema.json" "$PY" -m mlprobe schema doctor
expect "doctor --json validates against mlprobe schema doctor" "$PY" - "$out/doctor.json" "$out/doctor.schema.json" <<'PYEOF'
import json, sys
doc, schema = (json.load(open(p)) for p in sys.argv[1:3])
try:
    import jsonschema
except ImportError:  # the image may lack jsonschema: check the shape the schema requires by hand
    assert all(k in doc for k in schema["required"]), "missing keys"
    assert doc["verdict"] in ("ok", "blocking")
else:
    jsonschema.Draft202012Validator(schema).validate(doc)
PYEOF

step doctor-cvd-empty "$out/doctor-cvd-empty.txt" env CUDA_VISIBLE_DEVICES= "$PY" -m mlprobe doctor -v --python "$PY"; rc=$?
expect "doctor with CUDA_VISIBLE_DEVICES=\"\" exits 1 (blocking)" test "$rc" -eq 1
expect "doctor with CUDA_VISIBLE_DEVICES=\"\" names the variable as blocking" \
  grep -q "BLOCKING  CUDA_VISIBLE_DEVICES='' hides every NVIDIA GPU" "$out/doctor-cvd-empty.txt"
step doctor-cvd-empty-json "$out/doctor-cvd-empty.json" env CUDA_VISIBLE_DEVICES= "$PY" -m mlprobe doctor --json --python "$PY"

step capture "$out/capture.txt" "$PY" -m mlprobe capture "$caps/linux-nvidia-h200-doctor-capture"
step capture-cvd-empty "$out/capture-cvd-empty.txt" env CUDA_VISIBLE_DEVICES= "$PY" -m mlprobe capture \
  "$caps/linux-nvidia-h200-cuda-visible-devices-empty-capture"
step replay "$out/doctor-replay.json" "$PY" -m mlprobe doctor --json --replay "$caps/linux-nvidia-h200-doctor-capture"; rc=$?
expect "doctor --replay of the capture exits 0" test "$rc" -eq 0
step replay-cvd-empty "$out/doctor-replay-cvd-empty.json" "$PY" -m mlprobe doctor --json --replay \
  "$caps/linux-nvidia-h200-cuda-visible-devices-empty-capture"; rc=$?
expect "doctor --replay of the CUDA_VISIBLE_DEVICES=\"\" capture exits 1" test "$rc" -eq 1
expect "the replay's blocking findings include visible-devices-hide-all" "$PY" -c '
import json, sys
doc = json.load(open(sys.argv[1]))
assert "visible-devices-hide-all" in [f["rule"] for f in doc["findings"] if f["severity"] == "blocking"]
' "$out/doctor-replay-cvd-empty.json"

tar -czf "$out/captures.tar.gz" -C "$caps" . 2>> "$log"
rm -rf "$caps"
cat "$checks" "$times"
! grep -q '^FAIL' "$checks"
