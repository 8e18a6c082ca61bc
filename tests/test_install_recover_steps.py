"""`install --recover` after a kill -9 at every step the journal records: the person's files, written
while the install ran or after it died, are all kept (and named), and the venv is the one it was
before (or gone, when the install was making it) plus those files. Real pip and uv, a local wheel
folder (--no-index --find-links), the install stopping itself through MLPROBE_TEST_JOURNAL_STOP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlprobe.install.transaction import STOP_ENV
from tests.pep503_server import build_wheel, make_venv, tree_state
from tests.uv_path import UV, UV_DIR

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
# Where a person puts a file: the venv itself, a folder of theirs, site-packages, a package folder the
# install is about to make, the scripts folder.
PLACES = ["notebook-{i}.ipynb", "mywork/results-{i}.csv", SITE + "/my_helper_{i}.py",
          SITE + "/demo_app/notes-{i}.txt", "bin/my-tool-{i}"]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    build_wheel(folder, "goodlib", "1.0")
    build_wheel(folder, "goodlib", "2.0")
    build_wheel(folder, "demo-app", "1.0", requires=["goodlib>=2"])
    return folder


def _env(work: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(work / "cache")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PIP_NO_CACHE_DIR"] = "1"
    env["UV_CACHE_DIR"] = str(work / "uv-cache")
    env.pop(STOP_ENV, None)
    if UV_DIR:
        env["PATH"] = UV_DIR + os.pathsep + env.get("PATH", "")
    return env


def _old_venv(venv: Path, wheels: Path, work: Path) -> Dict[str, str]:
    py = make_venv(venv)
    assert UV is not None
    subprocess.run([UV, "pip", "install", "--python", str(py), "--no-index", "--find-links", str(wheels),
                    "goodlib==1.0"], check=True, capture_output=True, timeout=120, env=_env(work))
    return tree_state(venv)


def _install(work: Path, wheels: Path, venv: Path, installer: str, stop: int,
             writes: List[Tuple[float, str]], counter: List[int]) -> Tuple[int, Dict[str, str]]:
    """`install --apply` stopping itself at journal write `stop`; the person writes `writes` (delay,
    place) meanwhile. Returns the install's exit status and the files written {relative path: text}."""
    recipe = work / "recipe.json"
    recipe.write_text(json.dumps({"recipe": "demo", "title": "a demo recipe", "framework": "demo",
                                  "packages": ["demo-app"], "env": {"DEMO_MODE": "1"}}))
    env = dict(_env(work), **{STOP_ENV: str(stop)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlprobe", "install", "--recipe-file", str(recipe), "--no-index", "--find-links",
         str(wheels), "--apply", "--no-verify", "--no-kernel", "--installer", installer, "--venv", str(venv),
         *(["--without-pip"] if installer == "pip" else [])],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    written: Dict[str, str] = {}

    def write_all() -> None:
        start = time.monotonic()
        for delay, place in sorted(writes):
            time.sleep(max(0.0, start + delay - time.monotonic()))
            counter[0] += 1
            rel = place.format(i=counter[0])
            (venv / rel).parent.mkdir(parents=True, exist_ok=True)
            (venv / rel).write_text(f"the person's work {counter[0]}")
            written[rel] = f"the person's work {counter[0]}"

    writer = threading.Thread(target=write_all)
    writer.start()
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        writer.join()
    return proc.returncode, written


def _write_after(venv: Path, places: List[str], counter: List[int]) -> Dict[str, str]:
    out = {}
    for place in places:
        counter[0] += 1
        rel = place.format(i=counter[0])
        (venv / rel).parent.mkdir(parents=True, exist_ok=True)
        (venv / rel).write_text(f"after {counter[0]}")
        out[rel] = f"after {counter[0]}"
    return out


def _recover(work: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "mlprobe", "install", "--recover", "--json"], cwd=work,
                          capture_output=True, text=True, timeout=180, env=_env(work))


def _check_every_step(work: Path, wheels: Path, installer: str, existing: bool,
                      schedule: List[Tuple[List[Tuple[float, str]], List[str]]]) -> int:
    """Kill the install at journal write 1, 2, … until it completes; returns how many steps there were."""
    counter = [0]
    for stop in range(1, len(schedule) + 1):
        case = work / f"{installer}-{'old' if existing else 'new'}-{stop}"
        case.mkdir()
        (case / "cache").mkdir()
        venv = case / "env"
        before: Optional[Dict[str, str]] = _old_venv(venv, wheels, case) if existing else None
        during, after = schedule[stop - 1]
        rc, mine = _install(case, wheels, venv, installer, stop, during, counter)
        if rc == 0:
            assert stop > 3, "the install wrote its journal fewer times than expected"
            return stop - 1
        assert rc == -9, f"step {stop}: the install did not stop itself (rc {rc})"
        mine.update(_write_after(venv, after, counter))
        rec = _recover(case)
        assert rec.returncode == 0, f"step {stop}: {rec.stderr}"
        said = " ".join(json.loads(rec.stdout)["recovered"])
        now = tree_state(venv)
        for rel, text in mine.items():
            assert (venv / rel).read_text() == text, f"step {stop}: {rel} was lost"
            assert str(venv / rel) in said, f"step {stop}: recover does not name the kept {rel}: {said}"
        expected = dict(before or {})
        for rel in mine:
            expected[rel] = now.get(rel, "?")
            parts = Path(rel).parts
            for i in range(1, len(parts)):
                expected.setdefault(str(Path(*parts[:i])), "dir")
        assert now == expected, (f"step {stop}: the venv differs from the old one plus the person's files: "
                                 f"extra {sorted(set(now) - set(expected))[:8]}, "
                                 f"missing {sorted(set(expected) - set(now))[:8]}")
        if not existing and not mine:
            assert not venv.exists(), f"step {stop}: the venv the install was making is still there"
        shutil.rmtree(case, ignore_errors=True)
    pytest.fail(f"the install did not complete within {len(schedule)} journal steps")


@pytest.mark.skipif(UV is None, reason="needs uv")
@pytest.mark.parametrize("installer,existing", [("uv", True), ("pip", True), ("uv", False)],
                         ids=["uv-existing-venv", "pip-existing-venv", "uv-new-venv"])
@settings(max_examples=1, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schedule=st.lists(st.tuples(st.lists(st.tuples(st.floats(0, 1.0), st.sampled_from(PLACES)), max_size=2),
                                    st.lists(st.sampled_from(PLACES), max_size=2)), min_size=30, max_size=30))
def test_recover_after_a_kill_at_every_journal_step_keeps_every_file_of_the_person(
        tmp_path_factory: pytest.TempPathFactory, wheels: Path, installer: str, existing: bool,
        schedule: List[Tuple[List[Tuple[float, str]], List[str]]]) -> None:
    """For each journal step N: writes while the install runs (at drawn moments), the kill -9 at N,
    writes after it, then --recover; the drawn schedule is one per step."""
    work = tmp_path_factory.mktemp("steps")
    steps = _check_every_step(work, wheels, installer, existing, schedule)
    assert steps >= 4
