"""The chosen build stays, and a lock reproduces it: real pip and uv against a real venv made by
`mlprobe install --apply`, with wheels built here (`demo 1.0+cpu`, the labelled build the recipe
asks for, and `demo 1.0`, an unlabelled one of the same version: what a later `pip install` from
the default index would bring). One venv for the whole module; the tests run in file order."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from mlprobe.install import lock as locks
from mlprobe.install import pin as pins
from tests.pep503_server import build_wheel
from tests.uv_path import UV

pytestmark = pytest.mark.slow



def _env(home: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({"XDG_CACHE_HOME": str(home / "cache"), "PIP_NO_CACHE_DIR": "1", "UV_NO_CACHE": "1",
                "PIP_FIND_LINKS": " ", "PIP_EXTRA_INDEX_URL": " ", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    env.pop("UV_CONSTRAINT", None)
    env.pop("PIP_CONSTRAINT", None)
    return env


def _mlprobe(args: List[str], home: Path, timeout: float = 600) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "mlprobe", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(home), cwd=home)


def _version(python: Path) -> str:
    cp = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('demo'))"],
                        capture_output=True, text=True, timeout=60)
    return cp.stdout.strip()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    h = tmp_path_factory.mktemp("keep")
    build_wheel(h / "labelled", "demo", "1.0+cpu")
    build_wheel(h / "plain", "demo", "1.0")
    (h / "demo.json").write_text(json.dumps({"recipe": "demo-cpu", "title": "demo, +cpu build",
                                             "packages": ["demo"], "env": {"DEMO_MODE": "fast"}}))
    return h


@pytest.fixture(scope="module")
def venv(home: Path) -> Path:
    v = home / "venv with space"
    r = _mlprobe(["install", "--recipe-file", str(home / "demo.json"), "--no-index", "--find-links",
                  str(home / "labelled"), "--apply", "--venv", str(v), "--installer", "pip", "--json"], home)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)["result"]
    assert result["pins"] == ["demo==1.0+cpu"] and result["lock_error"] is None, result
    return v


def test_the_install_pins_its_build_for_pip_and_uv(venv: Path) -> None:
    p = pins.read_pins(venv)
    assert p is not None and [x.requirement for x in p.pins] == ["demo==1.0+cpu"]
    assert p.recipe == "demo-cpu" and p.pip_conf and p.uv_env
    # the recipe's own variable is still there beside UV_CONSTRAINT
    scripts = venv / "bin"
    from mlprobe.venvconf import activate

    env = activate.read_env(scripts)
    assert env["DEMO_MODE"] == "fast" and env["UV_CONSTRAINT"] == pins.file_url(venv / pins.PINS_FILE)


def test_plain_pip_in_the_venv_refuses_to_replace_the_build(home: Path, venv: Path) -> None:
    python = venv / "bin" / "python"
    r = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(home / "plain"),
                        "--force-reinstall", "--no-deps", "demo==1.0"], capture_output=True, text=True,
                       timeout=300, env=_env(home))
    assert r.returncode != 0
    assert "demo==1.0+cpu" in r.stdout + r.stderr and "conflict" in (r.stdout + r.stderr).lower()
    assert _version(python) == "1.0+cpu"


@pytest.mark.skipif(UV is None, reason="uv is not installed")
def test_uv_in_the_activated_venv_refuses_too(home: Path, venv: Path) -> None:
    script = 'source "$1" && exec "$2" pip install --no-index --find-links "$3" --reinstall --no-deps demo==1.0'
    r = subprocess.run(["bash", "-c", script, "_", str(venv / "bin" / "activate"), UV, str(home / "plain")],
                       capture_output=True, text=True, timeout=300, env=_env(home))
    assert r.returncode != 0, r.stderr
    assert "demo==1.0+cpu" in r.stderr
    assert _version(venv / "bin" / "python") == "1.0+cpu"


def test_a_build_swapped_anyway_is_named(home: Path, venv: Path) -> None:
    """PIP_CONSTRAINT wins over every pip.conf: set empty, the pin is bypassed. read_pins +
    find_swaps (what `mlprobe doctor` calls) name the swap; the labelled build is put back after."""
    python = venv / "bin" / "python"
    env = {**_env(home), "PIP_CONSTRAINT": " "}
    subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(home / "plain"),
                    "--force-reinstall", "--no-deps", "demo==1.0"], check=True, capture_output=True,
                   timeout=300, env=env)
    pinset = pins.read_pins(venv)
    assert pinset is not None
    swaps = pins.find_swaps(pinset, {"demo": _version(python)})
    assert [s.sentence() for s in swaps] == ["demo 1.0+cpu was pinned; 1.0 is installed instead"]
    subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(home / "labelled"),
                    "--force-reinstall", "--no-deps", "demo==1.0+cpu"], check=True, capture_output=True,
                   timeout=300, env=_env(home))
    assert pins.find_swaps(pinset, {"demo": _version(python)}) == []


def test_the_lock_lists_the_installed_wheel_with_its_hash(home: Path, venv: Path) -> None:
    lock = locks.read_lock(venv / "pylock.toml")
    assert str(lock.lock_version) == "1.0" and lock.created_by == "mlprobe"
    [pkg] = lock.packages
    wheel = home / "labelled" / "demo-1.0+cpu-py3-none-any.whl"
    assert (pkg.name, str(pkg.version)) == ("demo", "1.0+cpu")
    assert pkg.wheels[0].hashes["sha256"] == locks.sha256_of(wheel)
    rec = locks.recommendation_of(lock)
    assert rec is not None and rec.env == {"DEMO_MODE": "fast"}


def test_from_lock_refuses_a_file_that_does_not_match_its_hash(home: Path, venv: Path) -> None:
    bad = home / "impostor"
    bad.mkdir()
    # the unlabelled build's bytes under the labelled build's name
    shutil.copy(home / "plain" / "demo-1.0-py3-none-any.whl", bad / "demo-1.0+cpu-py3-none-any.whl")
    target = home / "from-bad-lock"
    r = _mlprobe(["install", "--from-lock", str(venv / "pylock.toml"), "--no-index", "--find-links", str(bad),
                  "--apply", "--venv", str(target), "--installer", "pip"], home)
    assert r.returncode != 0 and "HASHES" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert not target.exists()


@pytest.mark.skipif(UV is None, reason="uv is not installed")
def test_from_lock_reproduces_the_install_elsewhere_with_uv(home: Path, venv: Path) -> None:
    target = home / "from-lock"
    env_path = os.pathsep.join([str(Path(UV).parent), os.environ.get("PATH", "")])
    r = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--from-lock", str(venv / "pylock.toml"),
                        "--no-index", "--find-links", str(home / "labelled"), "--apply", "--venv", str(target),
                        "--installer", "uv", "--json"], capture_output=True, text=True, timeout=600,
                       env={**_env(home), "PATH": env_path}, cwd=home)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["installer"] == "uv" and "--require-hashes" in doc["steps"][1]["command"]
    assert _version(target / "bin" / "python") == "1.0+cpu"
    assert doc["result"]["pins"] == ["demo==1.0+cpu"]  # the recipe the lock carries, pinned again
    from mlprobe.venvconf import activate

    assert activate.read_env(target / "bin")["DEMO_MODE"] == "fast"


def test_unpin_lifts_the_pins_and_says_so(home: Path, venv: Path) -> None:
    r = _mlprobe(["install", "--unpin", str(venv)], home)
    assert r.returncode == 0 and "demo==1.0+cpu" in r.stderr, r.stderr
    assert pins.read_pins(venv) is None
    assert not (venv / "pip.conf").exists() and not (venv / pins.PINS_FILE).exists()
    from mlprobe.venvconf import activate

    assert activate.read_env(venv / "bin") == {"DEMO_MODE": "fast"}
    dry = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--dry-run", "--no-index",
                          "--find-links", str(home / "plain"), "--force-reinstall", "--no-deps", "demo==1.0"],
                         capture_output=True, text=True, timeout=300, env=_env(home))
    assert dry.returncode == 0 and "Would install demo-1.0" in dry.stdout, dry.stdout + dry.stderr
    again = _mlprobe(["install", "--unpin", str(venv)], home)
    assert again.returncode == 0 and "nothing to lift" in again.stderr
