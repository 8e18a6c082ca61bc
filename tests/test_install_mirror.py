"""`mlprobe install --framework torch --apply` against a local mirror with PyTorch's own layout
(/whl/cpu/<project>/ pages, files beside them), built from the real torch CPU wheel and its
dependencies, served over HTTP on 127.0.0.1. The only source given is MLPROBE_PYTORCH_INDEX_URL,
as a person with a PyTorch mirror would set it; then the same command with the mirror stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from mlprobe.install.lock import read_lock, sha256_of
from mlprobe.install.pin import read_pins
from tests.pep503_server import LocalIndex, build_wheel, free_port_url
from tests.uv_path import UV

pytestmark = pytest.mark.slow

TORCH = "torch==2.13.0"


def _mlprobe_env(index_base: str, home: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["MLPROBE_PYTORCH_INDEX_URL"] = index_base
    env["XDG_CACHE_HOME"] = str(home / "cache")  # the transcript log stays in the test's folder
    env["PIP_NO_CACHE_DIR"] = "1"
    env.pop("MLPROBE_OVERRIDE_CPU_FLAGS", None)
    return env


@pytest.fixture(scope="module")
def mirror_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real torch CPU wheel and everything it needs, fetched by pip through its own configuration."""
    folder = tmp_path_factory.mktemp("pytorch-mirror")
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "-q", "-d", str(folder),
                        TORCH], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        pytest.fail(f"pip could not fetch {TORCH} and its dependencies for the mirror:\n{r.stderr[-2000:]}")
    wheels = sorted(p.name for p in folder.glob("*.whl"))
    torch_wheels = [w for w in wheels if w.startswith("torch-")]
    assert torch_wheels and "+cpu" in torch_wheels[0], f"expected the +cpu build, got {wheels}"
    return folder


@pytest.fixture()
def mirror(mirror_wheels: Path) -> Iterator[LocalIndex]:
    with LocalIndex(mirror_wheels, variant="cpu", max_requests=5000, lifetime_s=1500) as idx:
        yield idx


@dataclass
class Installed:
    """The one venv this module installs from the mirror (the later tests read and poke it)."""
    venv: Path
    doc: Dict[str, Any]
    mirror_url: str
    requests: List[str]
    home: Path


@pytest.fixture(scope="module")
def installed(mirror_wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    home = tmp_path_factory.mktemp("mirror-install")
    venv = home / "venv"
    with LocalIndex(mirror_wheels, variant="cpu", max_requests=5000, lifetime_s=1500) as idx:
        r = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--framework", "torch", "--apply",
                            "--venv", str(venv), "--json"], capture_output=True, text=True, timeout=1500,
                           env=_mlprobe_env(idx.url, home), cwd=home)
        assert r.returncode == 0, r.stderr[-3000:]
        return Installed(venv, json.loads(r.stdout), idx.url, list(idx.requests), home)


def _torch_version(venv: Path) -> str:
    version = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, timeout=300)
    return version.stdout.strip() or version.stderr[-1000:]


def test_torch_from_a_local_pytorch_mirror_installs_imports_and_verifies(installed: Installed) -> None:
    doc, venv = installed.doc, installed.venv
    assert doc["applied"] is True and doc["recipe"]["recipe"] == "torch-cpu"
    assert doc["recipe"]["sources"]["index_url"] == installed.mirror_url + "/cpu"
    assert doc["recipe"]["sources"]["origin"] == "recipe"
    # pip took torch from the mirror, not from anywhere else
    assert any(p.startswith("/whl/cpu/torch-2.13.0%2Bcpu") or p.startswith("/whl/cpu/torch-2.13.0+cpu")
               for p in installed.requests), installed.requests[:20]
    assert _torch_version(venv) == "2.13.0+cpu"
    result = doc["result"]
    assert result["import_ok"] is True
    verdicts = [(x["framework"], x["device"], x["verdict"]) for x in result["verify"]["results"]]
    assert ("torch", "cpu", "CPU") in verdicts, verdicts


@pytest.fixture(scope="module")
def unlabelled_torch(installed: Installed) -> Path:
    """A folder holding an unlabelled torch 2.13.0: a minimal wheel built here (only its name and
    version matter to the pin), as the default index would offer `torch==2.13.0`."""
    folder = installed.home / "unlabelled"
    build_wheel(folder, "torch", "2.13.0")
    return folder


def test_the_install_keeps_torch_cpu_pinned_and_locked(installed: Installed, mirror_wheels: Path) -> None:
    result = installed.doc["result"]
    assert "torch==2.13.0+cpu" in result["pins"], result["pins"]
    pinset = read_pins(installed.venv)
    assert pinset is not None and pinset.pip_conf and pinset.uv_env
    torch_pin = next(p for p in pinset.pins if p.name == "torch")
    assert torch_pin.index == installed.mirror_url + "/cpu"
    lock = read_lock(Path(result["lock"]))
    torch = next(p for p in lock.packages if p.name == "torch")
    assert str(torch.version) == "2.13.0+cpu"
    wheel = next(mirror_wheels.glob("torch-2.13.0+cpu-*.whl"))
    assert torch.wheels[0].hashes["sha256"] == sha256_of(wheel)
    assert torch.wheels[0].url.startswith(installed.mirror_url + "/cpu/")


def test_plain_pip_in_the_venv_refuses_the_unlabelled_torch(installed: Installed, unlabelled_torch: Path) -> None:
    r = subprocess.run([str(installed.venv / "bin" / "python"), "-m", "pip", "install", "--force-reinstall",
                        "--no-deps", "--no-index", "--find-links", str(unlabelled_torch), "torch==2.13.0"],
                       capture_output=True, text=True, timeout=600, env=_plain_env())
    assert r.returncode != 0, r.stdout[-2000:]
    # pip merges the constraints it read (this machine's own cap among them) into one specifier
    assert "==2.13.0+cpu" in r.stdout and "ResolutionImpossible" in r.stderr, r.stdout[-2000:]
    assert _torch_version(installed.venv) == "2.13.0+cpu"


@pytest.mark.skipif(UV is None, reason="uv is not installed")
def test_uv_in_the_activated_venv_refuses_the_unlabelled_torch(installed: Installed,
                                                               unlabelled_torch: Path) -> None:
    script = ('source "$1" && exec "$2" pip install --reinstall --no-deps --no-index --find-links "$3" '
              '"torch==2.13.0"')
    r = subprocess.run(["bash", "-c", script, "_", str(installed.venv / "bin" / "activate"), UV,
                        str(unlabelled_torch)], capture_output=True, text=True, timeout=600, env=_plain_env())
    assert r.returncode != 0, r.stderr[-2000:]
    assert "2.13.0+cpu" in r.stderr and "unsatisfiable" in r.stderr, r.stderr[-2000:]
    assert _torch_version(installed.venv) == "2.13.0+cpu"


def _plain_env() -> Dict[str, str]:
    """A person's shell: no constraint set, nothing cached, and none of this machine's own
    find-links (which hold the +cpu wheel) so that the unlabelled one is all pip is offered."""
    env = dict(os.environ)
    for k in ("PIP_CONSTRAINT", "UV_CONSTRAINT", "VIRTUAL_ENV"):
        env.pop(k, None)
    env.update({"PIP_NO_CACHE_DIR": "1", "UV_NO_CACHE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_FIND_LINKS": " ", "PIP_EXTRA_INDEX_URL": " "})
    return env


def test_mirror_down_stops_before_creating_anything(tmp_path: Path) -> None:
    down = free_port_url().rstrip("/").rsplit("/", 1)[0] + "/whl"  # nothing listens there
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--framework", "torch", "--apply",
                        "--venv", str(venv)], capture_output=True, text=True, timeout=300,
                       env=_mlprobe_env(down, tmp_path), cwd=tmp_path)
    assert r.returncode != 0
    assert not venv.exists(), "the venv was created although the index does not answer"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == []
    for option in ("--index-url", "--find-links", "--use-pip-config"):
        assert option in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("bad", ["ftp://mirror.example/whl", "mirror.example/whl", "<pytorch-index>"])
def test_bad_mirror_url_in_the_environment_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    r = subprocess.run([sys.executable, "-m", "mlprobe", "plan", "--framework", "torch"],
                       capture_output=True, text=True, timeout=300, env=_mlprobe_env(bad, tmp_path))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "MLPROBE_PYTORCH_INDEX_URL" in r.stderr and "E517" in r.stderr and "Traceback" not in r.stderr
