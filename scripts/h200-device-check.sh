#!/usr/bin/env bash
# PlaidML on an NVIDIA GPU through OpenCL, installed offline by `mlprobe install --apply` with its
# device check, then verified: the run behind fixtures/linux-nvidia-h200-opencl-loaders and
# fixtures/verify-linux-nvidia-h200-plaidml-0.7-opencl. On a machine without internet:
#
#   scripts/h200-device-check.sh WHEELS [OUT]
#
# WHEELS holds mlprobe's wheel, its dependencies and PlaidML's (plaidml-keras 0.7.0 and what it
# needs except numpy and scipy, which the image's Python has). VENV (default /opt/torch/.venv, the
# image's venv with torch) receives mlprobe and PlaidML. Everything lands in OUT/results.tar.gz.
set -u
cd "$(dirname "$0")/.."
whl="$(cd "${1:?usage: $0 WHEELS [OUT]}" && pwd)"
out="${2:-${OUT:-h200-out}}"
mkdir -p "$out/r"
VENV="${VENV:-/opt/torch/.venv}"
PY="$VENV/bin/python"
log="$out/r/log.txt"
: > "$log"
run() {  # run NAME ARGV... : stdout to r/NAME, stderr and timing to the log
  local name="$1"; shift
  echo "== $name: $*" >> "$log"
  local t0; t0=$(date +%s.%N)
  "$@" > "$out/r/$name" 2>> "$log"
  local rc=$?
  echo "== $name: exit $rc after $(python3 -c "import sys; print(round($(date +%s.%N) - $t0, 2))") s" >> "$log"
  return $rc
}
LOADERS='import json, sys; from mlprobe.verify.devicecheck import probe_loaders; print(json.dumps(probe_loaders(sys.executable), indent=1))'
loaders() { "$PY" -c "$LOADERS"; }
run pip-install-mlprobe "$PY" -m pip install --no-index --find-links "$whl" mlprobe
ML="$VENV/bin/mlprobe"
run version "$ML" -V
run env.txt env
run opencl-loaders-before.json loaders
run capture.txt "$ML" capture "$out/r/capture"
run plan-keras.json "$ML" plan --framework keras --json
run install.json "$ML" install --recipe plaidml-keras --apply --venv "$VENV" --find-links "$whl" --no-index \
    --no-verify --json
run activate-block.txt sed -n '/>>> mlprobe env >>>/,/<<< mlprobe env <<</p' "$VENV/bin/activate"
run vendors.txt sh -c "ls -la $VENV/etc/OpenCL/vendors && head $VENV/etc/OpenCL/vendors/*"
# the loader facts as `activate` leaves them
run opencl-loaders-after.json bash -c '. "$1/bin/activate" && "$1/bin/python" -c "$2"' _ "$VENV" "$LOADERS"
run verify-plaidml.json "$ML" verify --framework plaidml --python "$PY" --json
# a device that does not exist: named as not seen, exit 1
run verify-plaidml-not-seen.json "$ML" verify --framework plaidml --python "$PY" \
    --device opencl_nvidia_nvidia_h999.0 --quick --json
tar czf "$out/results.tar.gz" -C "$out" r
