#!/usr/bin/env bash
# The GPU machine, one call: PlaidML installed offline into the image's torch+jax venv with one command;
# PlaidML's devices, verify and doctor from a shell that never activated it (env -i), start-up hook on
# and off; then `mlprobe -v verify` of all three frameworks of that venv at once (torch, JAX, PlaidML),
# twice, each line of its timeline kept.
#   OUT=DIR scripts/gpu-plaidml-verify-three.sh      (everything packed into OUT/all.tgz)
# Needs (carried): .whl/d35 (mlprobe's own dependencies, wheels for CPython 3.12) and .whl/plaid
# (`mlprobe bundle --replay fixtures/linux-nvidia-h200-mlprobe-capture --recipe plaidml-keras
# --reuse-installed -o .whl/plaid`).
set -u
PY=/opt/torch/.venv/bin/python3
V=/opt/torch/.venv
mkdir -p /tmp/site
for w in .whl/d35/*.whl; do "$PY" -m zipfile -e "$w" /tmp/site || exit 1; done
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
E="env -i PATH=/usr/bin:/bin HOME=/root PYTHONPATH=/tmp/site:$PWD"
log="$OUT/machine.txt"
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > "$log" 2>&1
t0=$(date +%s)
( cd .whl/plaid && timeout 240 "$PY" -m mlprobe install --from-lock pylock.toml --find-links . --no-index --apply --no-verify --venv $V > "$OUT/plaid-install.txt" 2>&1; echo "plaid install rc $? $(( $(date +%s) - t0 )) s" >> "$log" )
P='import os, plaidml; ctx = plaidml.Context(); d = plaidml.devices(ctx, limit=100, return_all=True); print("OCL_ICD_VENDORS", os.environ.get("OCL_ICD_VENDORS")); print([x.id.decode() for x in d[0]], [x.id.decode() for x in d[1]])'
env -i PATH=/usr/bin:/bin HOME=/root $V/bin/python -c "$P" > "$OUT/plaid-list-plain.txt" 2>&1; echo "plaid list plain rc $?" >> "$log"
env -i PATH=/usr/bin:/bin HOME=/root MLPROBE_HOOK=0 $V/bin/python -c "$P" > "$OUT/plaid-list-hook-off.txt" 2>&1; echo "plaid list hook-off rc $?" >> "$log"
for mode in on off; do
  h=""; [ $mode = off ] && h="MLPROBE_HOOK=0"
  $E $h timeout 150 "$PY" -m mlprobe doctor --python $V/bin/python --json > "$OUT/plaid-doctor-hook-$mode.json" 2> "$OUT/plaid-doctor-hook-$mode.err"; echo "doctor hook-$mode rc $?" >> "$log"
  $E $h timeout 150 "$PY" -m mlprobe doctor --python $V/bin/python > "$OUT/plaid-doctor-hook-$mode.txt" 2>&1
done
$E timeout 150 "$PY" -m mlprobe capture "$OUT/plaid-hook-on" > "$OUT/capture-plaid-hook-on.txt" 2>&1; echo "plaid hook-on capture rc $?" >> "$log"
for round in 1 2; do
  t0=$(date +%s.%N)
  timeout 150 "$PY" -m mlprobe -v verify --python $V/bin/python --json > "$OUT/verify-three-$round.json" 2> "$OUT/verify-three-$round.err"
  rc=$?
  echo "verify three round $round rc $rc in $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s" >> "$log"
done
t0=$(date +%s.%N)
timeout 150 "$PY" -m mlprobe -v verify --framework torch --python $V/bin/python --json > "$OUT/verify-torch.json" 2> "$OUT/verify-torch.err"
echo "verify torch rc $? in $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s" >> "$log"
cd "$OUT" && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz all.tgz
