#!/usr/bin/env bash
# The offline install of a bundle, in one command, on a machine with no network (the H200 machine):
#   1. a venv made with `/opt/torch/.venv/bin/python3 -m venv --system-site-packages`;
#   2. mlprobe's own wheel installed into it offline (--no-index --no-deps: its dependencies come
#      from the system site packages);
#   3. `mlprobe install --from-lock BUNDLE/pylock.toml --find-links BUNDLE --no-index --apply`
#      into that venv (hashes checked, shims, env vars and files, pins, import check, verify);
#   4. `mlprobe verify --framework plaidml --python VENV/bin/python --json` once more on its own;
#   every output, the pins, the lock the install wrote, pip freeze and the timings under OUT.
#
#   scripts/h200-bundle.sh [BUNDLE_DIR] [MLPROBE_WHEEL]
#     BUNDLE_DIR     default build/h200-plaidml (made by `mlprobe bundle … -o build/h200-plaidml`)
#     MLPROBE_WHEEL  default the first build/mlprobe-wheel/mlprobe-*.whl
#   OUT            where outputs go (default ./h200-bundle-out)
#   BASE_PY        the base interpreter (default /opt/torch/.venv/bin/python3)
#   VENV           an existing venv to install into instead of a new one (e.g. /opt/torch/.venv, whose
#                  numpy and scipy a bundle made with --reuse-installed leaves out); with DEPS, a
#                  folder of wheels, mlprobe's own dependencies are installed from there too
set -u
cd "$(dirname "$0")/.."
bundle="${1:-build/h200-plaidml}"
wheel="${2:-$(ls build/mlprobe-wheel/mlprobe-*.whl 2>/dev/null | head -1)}"
out="${OUT:-h200-bundle-out}"
base="${BASE_PY:-/opt/torch/.venv/bin/python3}"
mkdir -p "$out"
log="$out/log.txt"
: > "$log"
say() { echo "== $*" | tee -a "$log"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

bundle="$(cd "$bundle" 2>/dev/null && pwd)" || { say "no bundle folder: ${1:-build/h200-plaidml}"; exit 2; }
[ -f "$bundle/pylock.toml" ] || { say "$bundle has no pylock.toml"; exit 2; }
[ -n "$wheel" ] && [ -f "$wheel" ] || { say "no mlprobe wheel (build/mlprobe-wheel/mlprobe-*.whl)"; exit 2; }
work="$(mktemp -d)"
venv="${VENV:-$work/plaidml-venv}"
export XDG_CACHE_HOME="$work/cache"  # transcripts land here; copied to OUT at the end

{
  say "machine"; uname -a; nvidia-smi -L 2>&1 | head -4; clinfo -l 2>&1 | head -12
  "$base" -c 'import sys, platform; print(sys.version); print(platform.libc_ver())'
  say "bundle $bundle"; ls -la "$bundle"; du -sh "$bundle"
} >> "$log" 2>&1
cp "$bundle/README.md" "$bundle/pylock.toml" "$out/" 2>/dev/null

t0=$(now)
if [ -z "${VENV:-}" ]; then
  say "venv: $base -m venv --system-site-packages $venv"
  "$base" -m venv --system-site-packages "$venv" >> "$log" 2>&1 || { say "venv failed"; exit 1; }
fi
if [ -n "${DEPS:-}" ]; then
  say "mlprobe offline: pip install --no-index --find-links $DEPS $wheel"
  "$venv/bin/python" -m pip install --no-index --find-links "$DEPS" --disable-pip-version-check "$wheel" \
    >> "$log" 2>&1 || { say "installing mlprobe failed"; exit 1; }
else
  say "mlprobe offline: pip install --no-index --no-deps $wheel"
  "$venv/bin/python" -m pip install --no-index --no-deps --disable-pip-version-check "$wheel" >> "$log" 2>&1 \
    || { say "installing mlprobe failed"; exit 1; }
fi
"$venv/bin/python" -m mlprobe -V >> "$log" 2>&1
t1=$(now)

say "install --from-lock (offline, --apply)"
"$venv/bin/python" -m mlprobe install --from-lock "$bundle/pylock.toml" --find-links "$bundle" --no-index \
  --apply --venv "$venv" --json > "$out/install.json" 2> "$out/install.stderr.txt"
install_rc=$?
t2=$(now)
say "install exit $install_rc in $(secs "$t1" "$t2") s"

say "verify --framework plaidml"
"$venv/bin/python" -m mlprobe verify --framework plaidml --python "$venv/bin/python" --json \
  > "$out/verify.json" 2> "$out/verify.stderr.txt"
verify_rc=$?
t3=$(now)
say "verify exit $verify_rc in $(secs "$t2" "$t3") s"

{
  say "pins"; cat "$venv/mlprobe-pins.txt" 2>&1; cat "$venv/pip.conf" 2>&1
  say "a plain pip install that would replace plaidml (must be refused)"
  "$venv/bin/python" -m pip install --no-index --find-links "$bundle" --dry-run "plaidml==0.6.4" 2>&1 | tail -4
  say "pip freeze"; "$venv/bin/python" -m pip freeze --all 2>&1
  say "pip check"; "$venv/bin/python" -m pip check 2>&1
} >> "$log" 2>&1
cp "$venv/pylock.toml" "$out/installed-pylock.toml" 2>/dev/null
cp "$XDG_CACHE_HOME"/mlprobe/logs/*.log "$out/" 2>/dev/null
python3 - "$out" "$install_rc" "$verify_rc" "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")" "$(secs "$t2" "$t3")" <<'EOF' | tee -a "$log"
import json, sys
out, irc, vrc, t_tool, t_install, t_verify = sys.argv[1:]
print(f"mlprobe into the venv {t_tool} s; install --from-lock {t_install} s (exit {irc}); verify {t_verify} s (exit {vrc})")
try:
    doc = json.load(open(f"{out}/verify.json"))
    for r in doc.get("results") or []:
        print(f"  {r.get('framework')} {r.get('device')}: {r.get('verdict')} "
              f"{r.get('images_per_s') or (r.get('speed') or {}).get('images_per_s') or ''} {r.get('reason') or ''}")
except Exception as exc:
    print(f"  verify.json unreadable: {exc}")
EOF
rm -rf "$work"
exit $(( install_rc != 0 ? install_rc : verify_rc ))
