#!/usr/bin/env bash
# The multi-GPU live run in one command, on a machine with two or more NVIDIA GPUs:
#   scan --json (every GPU with its bus id, memory, compute capability and `nvidia-smi topo -m`
#   facts), capture (the bundle for a fixture, with nvidia-smi-topo-m.txt), plan (GPUs each
#   framework will use; again with CUDA_VISIBLE_DEVICES=0 to show the hidden ones are noticed),
#   verify --framework torch (a result per GPU, and any GPU slower than its peers by > 20 %),
#   and CLOSING.md with the figures, the commands and the bundle's name.
#
#   scripts/multigpu-live.sh [OUT_DIR]      (default: $OUT, else ./multigpu-out)
#   PY=/path/to/python scripts/multigpu-live.sh   (an interpreter with torch; default: the first
#                                                  of /opt/torch/.venv/bin/python, python3 with torch)
#
# At most 8 files land in OUT_DIR (the bundle is one .tar.gz), so the device tool brings them all back.
set -u
cd "$(dirname "$0")/.."
out="${1:-${OUT:-multigpu-out}}"
mkdir -p "$out"
if [ -z "${PY:-}" ]; then
  for cand in /opt/torch/.venv/bin/python python3; do
    if "$cand" -c "import torch" >/dev/null 2>&1; then PY="$cand"; break; fi
  done
fi
PY="${PY:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
log="$out/log.txt"
: > "$log"
cmds="$out/commands.txt"
: > "$cmds"
bundle="linux-nvidia-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
  | tr 'A-Z' 'a-z' | sed -e 's/nvidia //' -e 's/[^a-z0-9]\+/-/g' -e 's/-$//')-x$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')-mlprobe-capture"

step() {  # step NAME OUTFILE ARGV...: runs ARGV, stdout to OUTFILE, stderr to the log
  local name="$1" file="$2"; shift 2
  echo "$*" >> "$cmds"
  echo "== $name: $*" >> "$log"
  local t0=$SECONDS
  "$@" > "$file" 2>> "$log"
  echo "== $name: exit $? after $((SECONDS - t0)) s" >> "$log"
}

{ nvidia-smi -L; nvidia-smi topo -m; } >> "$log" 2>&1
step scan "$out/scan.json" "$PY" -m mlprobe scan --json
tmp="$(mktemp -d)"
step capture /dev/null "$PY" -m mlprobe capture "$tmp/$bundle"
tar -C "$tmp" -czf "$out/$bundle.tar.gz" "$bundle" 2>> "$log"
step plan "$out/plan.json" "$PY" -m mlprobe plan --json
step plan-hidden "$out/plan-hidden.json" env CUDA_VISIBLE_DEVICES=0 "$PY" -m mlprobe plan --json
{ "$PY" -m mlprobe plan --framework torch; CUDA_VISIBLE_DEVICES=0 "$PY" -m mlprobe plan --framework torch; } >> "$log" 2>&1
step verify "$out/verify.json" "$PY" -m mlprobe verify --framework torch --json
if "$PY" -m mlprobe fleet --help >/dev/null 2>&1 && "$PY" -c "import ray" >/dev/null 2>&1; then
  # One-node Ray cluster: the node with all its GPUs.
  "$PY" -c "import ray; ray.init(num_gpus=None); print(ray.cluster_resources())" >> "$log" 2>&1
  step fleet "$out/fleet.json" "$PY" -m mlprobe fleet scan --json
else
  echo "== fleet: skipped (no \`mlprobe fleet\` command or no ray in $PY)" >> "$log"
fi
echo "capture bundle: $bundle (in $bundle.tar.gz; unpack into fixtures/)" >> "$cmds"
"$PY" scripts/multigpu_closing.py "$out" > "$out/CLOSING.md" 2>> "$log"
rm -rf "$tmp" "$cmds"  # the commands are in CLOSING.md
cat "$out/CLOSING.md"
