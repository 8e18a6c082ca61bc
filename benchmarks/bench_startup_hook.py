"""What the start-up hook (mlprobe/venvconf/hook.py) costs every start of a venv's Python.

Makes a venv, then times `V/bin/python -c pass` with the hook (a plaidml-keras-sized set of settings
and the PlaidML shim) and without it (the same venv with MLPROBE_HOOK=0 costs the hook's import but
not its work, so the floor is a copy of the venv without the two files), the runs interleaved so that
both see the same machine. Prints the medians of N runs each and the difference (goal: <= 5 ms).

    python benchmarks/bench_startup_hook.py [-n 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mlprobe.venvconf import hook  # noqa: E402
from mlprobe.install.settings import precompile  # noqa: E402
from mlprobe.shims.plaidml_compat import MODULE_NAME, install_shim  # noqa: E402


def site_of(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def time_start(python: Path, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run([str(python), "-c", "pass"], check=True, env=env, timeout=60)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=20, help="runs of each (default 20)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, hooked = Path(tmp) / "plain", Path(tmp) / "hooked"
        for v in (plain, hooked):
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v)], check=True, timeout=300)
        site = site_of(hooked)
        install_shim(site)
        hook.write(site, {"KERAS_BACKEND": "plaidml.keras.backend", "PLAIDML_DEVICE_IDS": "opencl_nvidia_h100.0",
                          "PLAIDML_EXPERIMENTAL": "0", "OCL_ICD_VENDORS": str(hooked / "etc" / "OpenCL" / "vendors")},
                   [MODULE_NAME], recipe="plaidml-keras", label="keras plaidml")
        precompile(str(hooked / "bin" / "python"), [hook.module_path(site), site / f"{MODULE_NAME}.py"])
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        check = subprocess.run([str(hooked / "bin" / "python"), "-c", "import os; print(os.environ['KERAS_BACKEND'])"],
                               capture_output=True, text=True, env=env, timeout=60)
        assert check.stdout.strip() == "plaidml.keras.backend", check.stderr
        for _ in range(3):  # warm the disk cache for both
            time_start(plain / "bin" / "python", env)
            time_start(hooked / "bin" / "python", env)
        without, with_hook = [], []
        for _ in range(args.n):
            without.append(time_start(plain / "bin" / "python", env))
            with_hook.append(time_start(hooked / "bin" / "python", env))
        a, b = statistics.median(without), statistics.median(with_hook)
        print(f"python {sys.version.split()[0]}, {args.n} runs each, interleaved")
        print(f"  V/bin/python -c pass without the hook: median {a * 1000:.2f} ms")
        print(f"  V/bin/python -c pass with the hook:    median {b * 1000:.2f} ms")
        print(f"  the hook costs {(b - a) * 1000:+.2f} ms a start (goal <= 5 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
