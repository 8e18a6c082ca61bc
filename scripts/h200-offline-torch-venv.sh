#!/usr/bin/env bash
# The offline bundle installed into the environment it was made for: the bundle made from the GPU
# machine's capture with --reuse-installed leaves out what that environment (/opt/torch/.venv) already
# has (numpy, scipy, six, h5py, PyYAML), so it goes into that venv, then verify plaidml once more, timed.
#   OUT=DIR scripts/h200-offline-torch-venv.sh   (outputs packed into OUT/last.tgz)
set -u
mkdir -p "$OUT/w"
env -u PYTHONPATH VENV=/opt/torch/.venv DEPS=.whl/h200 OUT="$OUT/w/bundle" timeout 120 bash scripts/h200-bundle.sh build/h200-plaidml .whl/h200/mlprobe-0.1.0-py3-none-any.whl > "$OUT/w/bundle-run.txt" 2>&1
echo "bundle script exit $?" >> "$OUT/w/bundle-run.txt"
tail -5 "$OUT/w/bundle-run.txt"
t0=$(date +%s.%N)
env -u PYTHONPATH timeout 100 /opt/torch/.venv/bin/python3 -m mlprobe -v verify --framework plaidml --json > "$OUT/w/verify-plaidml-again.json" 2> "$OUT/w/verify-plaidml-again.stderr.txt"
echo "verify plaidml again: exit $? in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" | tee -a "$OUT/w/bundle-run.txt"
tar czf "$OUT/last.tgz" -C "$OUT/w" .
