"""`mlprobe install --apply` against the installers it drives, side by side in one run.

On one local PyTorch-shaped index (tests/pep503_server.py: an http.server serving /whl/cpu/<project>/
pages, PEP 691 JSON with PEP 700 sizes, PEP 658 metadata, the wheels beside them), with warm caches:

  raw uv       uv venv V && uv pip install --python V --index-url URL torch==2.13.0
  raw pip      python -m venv V && V/bin/python -m pip install --index-url URL torch==2.13.0
  mlprobe+uv   mlprobe install --framework torch --index-url URL --apply --no-verify --installer uv
  mlprobe+pip  the same with --installer pip

and the import check mlprobe runs (`V/bin/python -c "import torch"`, the first start in a venv just
made, timed in the raw installers' venvs). Goal: mlprobe+uv <= raw uv + import check + 1 s, and
mlprobe+pip <= raw pip + import check + 1 s. mlprobe's own steps are read from its transcript.

The wheels: torch==2.13.0 and its dependencies, `pip download`-ed (pip's own configuration: on an
offline machine its local folders) into a temporary folder, or --wheels DIR.

    python benchmarks/bench_install.py [--rounds 1] [--wheels DIR] [--only uv|pip]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.pep503_server import LocalIndex  # noqa: E402
from tests.uv_path import find_uv  # noqa: E402

TORCH = "torch==2.13.0"
TIMEOUT_S = 900


def isolated_env() -> Dict[str, str]:
    """pip and uv see only the index named on their command line (as mlprobe gives them)."""
    env = dict(os.environ)
    env.update({"PIP_FIND_LINKS": " ", "PIP_EXTRA_INDEX_URL": " ", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "UV_NO_CONFIG": "1"})
    env.pop("PIP_CONSTRAINT", None)
    return env


def timed(argvs: List[List[str]], env: Dict[str, str]) -> float:
    t0 = time.perf_counter()
    for argv in argvs:
        cp = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        if cp.returncode != 0:
            raise SystemExit(f"failed: {' '.join(argv)}\n{cp.stderr[-2000:]}")
    return time.perf_counter() - t0


def raw_uv(uv: str, venv: Path, url: str, env: Dict[str, str]) -> float:
    return timed([[uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
                  [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), "--index-url", url,
                   TORCH]], env)


def raw_pip(venv: Path, url: str, env: Dict[str, str]) -> float:
    return timed([[sys.executable, "-m", "venv", str(venv)],
                  [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--progress-bar", "off",
                   "--index-url", url, TORCH]], env)


def import_check(venv: Path, env: Dict[str, str]) -> float:
    return timed([[str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"]], env)


_STEP = re.compile(r"^\[[\d:]+\] \$ (\S+)(?: (\S+))?(?: (\S+))?")
_EXIT = re.compile(r"^\[[\d:]+\] exit \d+ after ([\d.]+) s")


def steps_of(log: Path) -> List[Tuple[str, float]]:
    """(what, seconds) of each command mlprobe ran, from its transcript."""
    out: List[Tuple[str, float]] = []
    what = ""
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _STEP.match(line)
        if m:
            exe = os.path.basename(m.group(1))
            rest = " ".join(g for g in m.groups()[1:] if g)
            what = f"{exe} {rest}" if exe in ("uv", "pip") or exe.startswith("python") else exe
            if " -c " in line:
                what = "import check"
            continue
        m = _EXIT.match(line)
        if m and what:
            out.append((what, float(m.group(1))))
            what = ""
    return out


def mlprobe(installer: str, venv: Path, url: str, env: Dict[str, str], log: Path) -> float:
    argv = [sys.executable, "-m", "mlprobe", "install", "--framework", "torch", "--index-url", url, "--apply",
            "--no-verify", "--installer", installer, "--venv", str(venv), "--log", str(log)]
    e = dict(env, PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    return timed([argv], e)


def wheels_for(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cp = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", TORCH, "-d", str(folder)],
                        capture_output=True, text=True, timeout=TIMEOUT_S)
    if cp.returncode != 0:
        raise SystemExit(f"pip download {TORCH} failed (pass --wheels DIR):\n{cp.stderr[-2000:]}")
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1, help="timed rounds after the warm-up (default 1)")
    ap.add_argument("--wheels", type=Path, help="a folder with torch 2.13.0 and its dependencies' wheels")
    ap.add_argument("--only", choices=("uv", "pip"), help="only this installer's pair")
    args = ap.parse_args()
    uv = find_uv()
    if uv is None and args.only != "pip":
        raise SystemExit("uv is not installed (put it on PATH or name it in MLPROBE_TEST_UV)")
    env = isolated_env()
    # mlprobe as an install has it: byte-compiled (PYTHONDONTWRITEBYTECODE would keep a checkout's
    # imports compiling from source at every start)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "mlprobe")], check=False, timeout=300,
                   capture_output=True)
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp_s:
        tmp = Path(tmp_s)
        if uv is not None:  # mlprobe finds the same uv on PATH (a link: uv's folder may hold a python too)
            (tmp / "bin").mkdir()
            (tmp / "bin" / "uv").symlink_to(uv)
            env["PATH"] = str(tmp / "bin") + os.pathsep + env.get("PATH", "")
        wheels = args.wheels or wheels_for(tmp / "wheels")
        n = len(list(wheels.glob("*.whl")))
        with LocalIndex(wheels, max_requests=10 ** 6, lifetime_s=7200, variant="cpu") as idx:
            url = idx.url + "/cpu"
            print(f"index: {url} ({n} wheels from {wheels}); Python {sys.version.split()[0]}; uv {uv}")
            results: Dict[str, List[float]] = {k: [] for k in ("raw uv", "raw pip", "mlprobe+uv", "mlprobe+pip",
                                                               "import (uv venv)", "import (pip venv)")}
            steps: Dict[str, List[Tuple[str, float]]] = {}
            own: Dict[str, List[float]] = {"uv": [], "pip": []}
            pairs = [p for p in ("uv", "pip") if args.only in (None, p)]
            for r in range(args.rounds + 1):  # round 0 warms every cache
                for p in pairs:
                    base = tmp / f"r{r}-{p}"
                    if p == "uv":
                        assert uv is not None
                        results["raw uv"].append(raw_uv(uv, base / "raw", url, env))
                        results["import (uv venv)"].append(import_check(base / "raw", env))
                    else:
                        results["raw pip"].append(raw_pip(base / "raw", url, env))
                        results["import (pip venv)"].append(import_check(base / "raw", env))
                    log = base / "mlprobe.log"
                    results[f"mlprobe+{p}"].append(mlprobe(p, base / "mlprobe", url, env, log))
                    steps[p] = steps_of(log)
                    own[p].append(results[f"mlprobe+{p}"][-1] - sum(sec for _w, sec in steps[p]))
                    for sub in ("raw", "mlprobe"):  # keep the disk free: torch is 1 GB installed
                        shutil.rmtree(base / sub, ignore_errors=True)
            print(f"{'what':<22}{'median s':>10}{'min s':>8}   (warm-up round left out; {args.rounds} timed)")
            med: Dict[str, float] = {}
            for k, v in results.items():
                if len(v) > 1:
                    med[k] = statistics.median(v[1:])
                    print(f"{k:<22}{med[k]:>10.2f}{min(v[1:]):>8.2f}   runs: {', '.join(f'{x:.2f}' for x in v[1:])}")
            for p in pairs:
                print(f"mlprobe+{p}'s commands (last round): "
                      + "; ".join(f"{w} {sec:.1f} s" for w, sec in steps.get(p, [])))
                print("  mlprobe's own work around them (start, scan, plan, index checks, resolution, pins, lock): "
                      f"median {statistics.median(own[p][1:]):.2f} s, min {min(own[p][1:]):.2f} s")
            ok = True
            for p in pairs:
                limit = med[f"raw {p}"] + med[f"import ({p} venv)"] + 1.0
                got = med[f"mlprobe+{p}"]
                verdict = "ok" if got <= limit else "MISSED"
                ok = ok and got <= limit
                print(f"goal mlprobe+{p} <= raw {p} + import check + 1 s: {got:.2f} <= "
                      f"{med[f'raw {p}']:.2f} + {med[f'import ({p} venv)']:.2f} + 1 = {limit:.2f}  {verdict}")
                # each round's three figures were taken one after the other: on a shared machine whose
                # load moves, a round compares like with like better than medians of different rounds
                rounds = [(m, r + i + 1.0) for m, r, i in zip(results[f"mlprobe+{p}"][1:], results[f"raw {p}"][1:],
                                                               results[f"import ({p} venv)"][1:])]
                print(f"  per round (mlprobe+{p} <= limit): "
                      + "; ".join(f"{m:.2f} <= {lim:.2f} {'ok' if m <= lim else 'MISSED'}" for m, lim in rounds))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
