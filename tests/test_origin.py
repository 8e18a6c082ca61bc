"""Advice to add one of mlprobe's extras fits how mlprobe was installed (a checkout, a wheel, a
folder, a URL, an index), read from pip's direct_url.json (PEP 610)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlprobe.origin import Origin, extra_install_command, installed_origin, origin_from_direct_url

from .conftest import ROOT

SITE = Path("/venv/lib/python3.11/site-packages/mlprobe")  # not a source tree


def origin_of(doc: object) -> Origin:
    return installed_origin(read=lambda: json.dumps(doc), package_dir=SITE)


# PEP 610's own examples, one per kind
@pytest.mark.parametrize("doc,command", [
    ({"url": "file:///home/me/mlprobe", "dir_info": {"editable": True}},
     "python -m pip install -e '/home/me/mlprobe[ray]'"),
    ({"url": "file:///home/me/mlprobe", "dir_info": {}}, "python -m pip install '/home/me/mlprobe[ray]'"),
    ({"url": "file:///tmp/w/mlprobe-0.1.0-py3-none-any.whl", "archive_info": {"hashes": {"sha256": "ab"}}},
     "python -m pip install '/tmp/w/mlprobe-0.1.0-py3-none-any.whl[ray]'"),
    ({"url": "https://example.org/mlprobe-0.1.0.tar.gz", "archive_info": {}},
     "python -m pip install 'mlprobe[ray] @ https://example.org/mlprobe-0.1.0.tar.gz'"),
    ({"url": "https://github.com/o/mlprobe.git", "vcs_info": {"vcs": "git", "commit_id": "7ca5d"}},
     "python -m pip install 'mlprobe[ray] @ git+https://github.com/o/mlprobe.git@7ca5d'"),
    ({"url": "file:///a%20b/mlprobe", "dir_info": {}}, "python -m pip install '/a b/mlprobe[ray]'"),
])
def test_each_kind_of_install_gets_its_own_command(doc: object, command: str) -> None:
    assert extra_install_command("ray", origin_of(doc)) == command


def test_no_record_or_a_broken_one_means_an_index() -> None:
    assert installed_origin(read=lambda: None, package_dir=SITE).kind == "index"
    assert installed_origin(read=lambda: "{not json", package_dir=SITE).kind == "index"
    assert origin_from_direct_url({"url": 3}).kind == "index"
    assert extra_install_command("ray", Origin("index")) == "python -m pip install 'mlprobe[ray]'"


def test_this_checkout_is_a_checkout() -> None:
    o = installed_origin()
    assert o.kind == "checkout" and Path(o.location or "") == ROOT
    assert extra_install_command("ray") == f"python -m pip install -e '{ROOT}[ray]'"


@pytest.mark.slow
def test_a_real_wheel_install_is_told_to_add_the_extra_to_that_wheel(tmp_path: Path) -> None:
    """mlprobe built into a wheel and installed from it (pip writes direct_url.json): the advice
    names that wheel, and pip accepts the command as it is printed."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "fixtures", "tests", ".venv", "*.egg-info",
                                                                 "build", ".mypy_cache", ".ruff_cache", ".pytest_cache"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(src)], check=True, timeout=300, env=env, capture_output=True)
    wheel = next(wheels.glob("mlprobe-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   timeout=300, env=env, capture_output=True)
    cp = subprocess.run([str(py), "-c", "from mlprobe.origin import extra_install_command as c; print(c('ray'))"],
                        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    command = cp.stdout.strip()
    assert command == f"python -m pip install '{wheel}[ray]'"
    import shlex

    argv = shlex.split(command)
    dry = subprocess.run([str(py), *argv[1:], "--dry-run", "--no-deps", "--no-index", "-q"], capture_output=True,
                         text=True, timeout=120, env=env, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
