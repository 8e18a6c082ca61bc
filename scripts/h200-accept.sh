#!/usr/bin/env bash
# The H200 machine's acceptance runs, in parts that each fit one device call:
#
#   scripts/h200-accept.sh offline   the bundle made here (build/h200-plaidml) installed offline into a new
#                                    --system-site-packages venv by `install --from-lock --apply`, with the
#                                    device check and verify (scripts/h200-bundle.sh); then doctor live and
#                                    replayed (scripts/h200-doctor.sh); then `verify --framework plaidml`
#                                    timed once more
#   scripts/h200-accept.sh speed     scan against its floors and collect_env, verify torch and torch+jax
#                                    against the hand-written loop, PlaidML's verify (scripts/h200-speed.sh)
#   scripts/h200-accept.sh all       both in one call, with fewer rounds (SCAN_N=7, VERIFY_ROUNDS=1, no
#                                    serial comparison, no second PlaidML verify), packed as they finish
#
# Needs, in this checkout: .whl/h200 (mlprobe's wheel and its dependencies for CPython 3.12 manylinux,
# with numpy for PlaidML's venv; the image's own numpy serves mlprobe run from this checkout) and,
# for `offline`, build/h200-plaidml (`mlprobe bundle --replay fixtures/linux-nvidia-h200-mlprobe-capture --recipe plaidml-keras --reuse-installed -o build/h200-plaidml`).
# Each part packs its outputs into one OUT/<part>-*.tgz (few files come back from that machine).
set -u
cd "$(dirname "$0")/.."
part="${1:?usage: $0 offline|speed|all}"
out="${OUT:-h200-accept-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
base=/opt/torch/.venv/bin/python3
wheel="$(ls .whl/h200/mlprobe-*.whl | head -1)"
# mlprobe's dependencies for the image's Python when mlprobe runs from this checkout (doctor, speed)
site=/tmp/mlprobe-site
"$base" -m pip install -q --no-index --no-deps --no-compile --target "$site" \
  $(ls .whl/h200/*.whl | grep -v -e '/mlprobe-' -e '/numpy-') >/dev/null 2>&1 || echo "installing the dependencies failed"
export PYTHONPATH="$site"
pv=/tmp/plaidml-venv  # PlaidML's venv, made by the bundle's install
make_plaidml_venv() {
  rm -rf "$pv"
  "$base" -m venv --system-site-packages "$pv"
  # the venv sees none of the image's packages (a venv made from a venv's python), nor the folder on
  # PYTHONPATH: mlprobe, its dependencies and numpy (which the bundle, made with --reuse-installed,
  # leaves to the environment) come from .whl/h200
  env -u PYTHONPATH VENV="$pv" DEPS=.whl/h200 OUT="$out/w/bundle" timeout 300 scripts/h200-bundle.sh build/h200-plaidml "$wheel"
  echo "h200-bundle.sh exit $?"
}
pack() { tar czf "$out/$1.tgz" -C "$out/w" . && rm -rf "$out/w"; }

case "$part" in
offline)
  mkdir -p "$out/w"
  make_plaidml_venv 2>&1 | tee "$out/w/offline-log.txt"
  OUT="$out/w/doctor" timeout 200 scripts/h200-doctor.sh 2>&1 | tee -a "$out/w/offline-log.txt"
  [ "${AGAIN:-1}" = 1 ] || { pack offline; exit 0; }
  # verify plaidml alone once more, timed (the bundle script's run came right after the install)
  t0=$(date +%s.%N)
  timeout 150 "$pv/bin/python" -m mlprobe verify --framework plaidml --python "$pv/bin/python" --json \
    > "$out/w/verify-plaidml-again.json" 2> "$out/w/verify-plaidml-again.stderr.txt"
  echo "verify plaidml again: exit $? in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" \
    | tee -a "$out/w/offline-log.txt"
  pack offline
  ;;
speed)
  mkdir -p "$out/w"
  [ -x "$pv/bin/python" ] || make_plaidml_venv > "$out/w/plaidml-venv-log.txt" 2>&1
  OUT="$out/w/speed" PLAIDML_PY="$pv/bin/python" timeout "${SPEED_TIMEOUT:-560}" scripts/h200-speed.sh 2>&1 | tail -40
  pack speed
  ;;
all)
  AGAIN=0 "$0" offline
  left=$(( ${BUDGET_S:-580} - SECONDS ))  # what is left of one device call for the speed part
  SPEED_TIMEOUT=$left SCAN_N="${SCAN_N:-7}" VERIFY_ROUNDS="${VERIFY_ROUNDS:-1}" SERIAL="${SERIAL:-0}" "$0" speed
  ;;
*) echo "unknown part: $part"; exit 2 ;;
esac
