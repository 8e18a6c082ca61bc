#!/usr/bin/env bash
# The GPU machine: what torch and JAX really load, clean and mixed, as capture bundles; doctor on each;
# then PlaidML installed offline into the torch venv with one command, seen from a shell that never
# activated it (env -i), with the start-up hook on and off.
#   OUT=DIR scripts/gpu-loaded-libraries.sh
# Needs (carried): .whl/d35 (mlprobe's own dependencies, wheels for CPython 3.12) and .whl/plaid
# (`mlprobe bundle --replay fixtures/linux-nvidia-h200-mlprobe-capture --recipe plaidml-keras
# --reuse-installed -o .whl/plaid`).
# Mixed loads reproduced: (1) LD_PRELOAD of the system's cuDNN graph library while the wheel's cuDNN
# loads beside it (one family from two places); (2) the system cuDNN folder first on LD_LIBRARY_PATH
# (the loader then takes the system libcudnn.so.9 instead of the wheel's).
set -u
PY=/opt/torch/.venv/bin/python3
V=/opt/torch/.venv
mkdir -p /tmp/site
for w in .whl/d35/*.whl; do "$PY" -m zipfile -e "$w" /tmp/site || exit 1; done
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false  # three captures share the GPU
M() { "$PY" -m mlprobe "$@"; }
{
  date -u; nvidia-smi -L; ldconfig -p | grep -E 'libcudnn(_graph)?\.so\.9 |libcudart\.so' ; ls /usr/lib/x86_64-linux-gnu/libcudnn* 2>&1 | head
  cat $V/pyvenv.cfg; "$PY" -c 'import torch; print(torch.__version__, torch.backends.cudnn.version())'
  "$PY" -c 'import jax; print(jax.__version__, jax.devices())' 2>&1 | tail -1
} > "$OUT/machine.txt" 2>&1
sysdir=$(dirname "$(ldconfig -p | awk '/libcudnn_graph\.so\.9 /{print $NF; exit}')")
echo "system cuDNN folder: $sysdir" >> "$OUT/machine.txt"
t0=$(date +%s)
( timeout 170 "$PY" -m mlprobe capture "$OUT/clean" > "$OUT/capture-clean.txt" 2>&1; echo "clean capture rc $?" >> "$OUT/machine.txt" ) &
( LD_PRELOAD="$sysdir/libcudnn_graph.so.9" timeout 170 "$PY" -m mlprobe capture "$OUT/preload" > "$OUT/capture-preload.txt" 2>&1; echo "preload capture rc $?" >> "$OUT/machine.txt" ) &
( LD_LIBRARY_PATH="$sysdir" timeout 170 "$PY" -m mlprobe capture "$OUT/ldpath" > "$OUT/capture-ldpath.txt" 2>&1; echo "ldpath capture rc $?" >> "$OUT/machine.txt" ) &
wait
echo "captures took $(( $(date +%s) - t0 )) s" >> "$OUT/machine.txt"
for b in clean preload ldpath; do timeout 60 "$PY" -m mlprobe doctor --replay "$OUT/$b" > "$OUT/doctor-$b.txt" 2>&1; echo "doctor $b rc $?" >> "$OUT/machine.txt"; done
# PlaidML, offline, one command, into the venv that has numpy/scipy/h5py (the bundle left them out)
t0=$(date +%s)
( cd .whl/plaid && timeout 240 "$PY" -m mlprobe install --from-lock pylock.toml --find-links . --no-index --apply --no-verify --venv $V > "$OUT/plaid-install.txt" 2>&1; echo "plaid install rc $? $(( $(date +%s) - t0 )) s" >> "$OUT/machine.txt" )
ls $V/lib/python3.12/site-packages | grep -i mlprobe >> "$OUT/machine.txt"
cp $V/lib/python3.12/site-packages/_mlprobe_startup.py "$OUT/" 2>/dev/null
P='import os, plaidml, plaidml.settings as s; ctx = plaidml.Context(); d = plaidml.devices(ctx, limit=100, return_all=True); print("OCL_ICD_VENDORS", os.environ.get("OCL_ICD_VENDORS")); print("PLAIDML_DEVICE_IDS", os.environ.get("PLAIDML_DEVICE_IDS")); print([x.id.decode() for x in d[0]], [x.id.decode() for x in d[1]])'
env -i PATH=/usr/bin:/bin HOME=/root $V/bin/python -c "$P" > "$OUT/plaid-list-plain.txt" 2>&1; echo "plaid list plain rc $?" >> "$OUT/machine.txt"
env -i PATH=/usr/bin:/bin HOME=/root MLPROBE_HOOK=0 $V/bin/python -c "$P" > "$OUT/plaid-list-hook-off.txt" 2>&1; echo "plaid list hook-off rc $?" >> "$OUT/machine.txt"
t0=$(date +%s)
env -i PATH=/usr/bin:/bin HOME=/root PYTHONPATH=/tmp/site:$PWD timeout 120 "$PY" -m mlprobe verify --framework plaidml --python $V/bin/python --quick --no-cpu-peers --json > "$OUT/plaid-verify-plain.json" 2> "$OUT/plaid-verify-plain.err"; echo "plaid verify plain rc $? $(( $(date +%s) - t0 )) s" >> "$OUT/machine.txt"
env -i PATH=/usr/bin:/bin HOME=/root MLPROBE_HOOK=0 PYTHONPATH=/tmp/site:$PWD timeout 120 "$PY" -m mlprobe verify --framework plaidml --python $V/bin/python --quick --no-cpu-peers --json > "$OUT/plaid-verify-hook-off.json" 2> "$OUT/plaid-verify-hook-off.err"; echo "plaid verify hook-off rc $?" >> "$OUT/machine.txt"
env -i PATH=/usr/bin:/bin HOME=/root PYTHONPATH=/tmp/site:$PWD timeout 150 "$PY" -m mlprobe doctor --python $V/bin/python --json > "$OUT/plaid-doctor.json" 2> "$OUT/plaid-doctor.err"; echo "plaid doctor rc $?" >> "$OUT/machine.txt"
env -i PATH=/usr/bin:/bin HOME=/root PYTHONPATH=/tmp/site:$PWD timeout 150 "$PY" -m mlprobe capture "$OUT/plaid-hook-on" > "$OUT/capture-plaid-hook-on.txt" 2>&1; echo "plaid hook-on capture rc $?" >> "$OUT/machine.txt"
env -i PATH=/usr/bin:/bin HOME=/root MLPROBE_HOOK=0 PYTHONPATH=/tmp/site:$PWD timeout 150 "$PY" -m mlprobe capture "$OUT/plaid-hook-off" > "$OUT/capture-plaid-hook-off.txt" 2>&1; echo "plaid hook-off capture rc $?" >> "$OUT/machine.txt"
# one file back: the device tool returns only a few files of a run
cd "$OUT" && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz all.tgz
