"""A real bundle for the H200 machine's capture, made here through pip's own configuration:
`mlprobe bundle --replay fixtures/linux-nvidia-h200-mlprobe-capture --recipe plaidml-keras -o DIR`.
Every wheel must fit that machine's Python (CPython 3.12, glibc 2.39, x86_64: tags computed here
by packaging, not by mlprobe), and pylock.toml must be a PEP 751 lock (lock-version 1.0, every
package with its wheels' sha256) that packaging's reader and uv's (or pip's) accept."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from packaging import tags as ptags
from packaging.utils import parse_wheel_filename

from mlprobe.install.lock import loads_toml, sha256_of
from tests.uv_path import find_uv

pytestmark = [pytest.mark.slow, pytest.mark.registry]

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "fixtures" / "linux-nvidia-h200-mlprobe-capture"


def _h200_tags() -> List[str]:
    host = json.loads((H200 / "host.json").read_text())
    assert host["python_version"].startswith("3.12") and host["libc"] == "glibc 2.39"
    plats = [f"manylinux_2_{m}_x86_64" for m in range(39, 4, -1)]
    plats += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    out = [str(t) for t in ptags.cpython_tags((3, 12), platforms=plats)]
    out += [str(t) for t in ptags.compatible_tags((3, 12), "cp312", plats)]
    assert set(host["python_tags"]) <= set(out)  # what that interpreter itself said is among them
    return out


def _python312() -> "str | None":
    for c in (shutil.which("python3.12"), os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12")):
        if c and os.path.exists(c):
            r = subprocess.run([c, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                               capture_output=True, text=True, timeout=60)
            if r.stdout.strip() == "True":
                return c
    return None


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("bundle")
    out = home / "h200-plaidml"
    r = subprocess.run([sys.executable, "-m", "mlprobe", "bundle", "--replay", str(H200), "--recipe",
                        "plaidml-keras", "-o", str(out), "--json"], capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "XDG_CACHE_HOME": str(home / "cache")}, cwd=home)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["recipe"] == "plaidml-keras" and doc["python_version"] == "3.12.3"
    assert sorted(p.name for p in home.iterdir() if p.name != "cache") == ["h200-plaidml"]  # no partial left
    return out


def test_every_wheel_fits_the_h200_machines_python(bundle: Path) -> None:
    wanted = set(_h200_tags())
    wheels = sorted(bundle.glob("*.whl"))
    names = {parse_wheel_filename(w.name)[0] for w in wheels}
    assert {"plaidml", "plaidml-keras", "keras", "numpy"} <= names, names
    for w in wheels:
        assert {str(t) for t in parse_wheel_filename(w.name)[3]} & wanted, f"{w.name} does not fit CPython 3.12"


def test_the_lock_is_pep751_with_every_wheels_hash(bundle: Path) -> None:
    doc = loads_toml((bundle / "pylock.toml").read_text(encoding="utf-8"))
    assert doc["lock-version"] == "1.0" and doc["created-by"] == "mlprobe"
    on_disk = {w.name: w for w in bundle.glob("*.whl")}
    listed = set()
    for pkg in doc["packages"]:
        assert pkg["wheels"], pkg["name"]
        for w in pkg["wheels"]:
            f = on_disk[w["name"]]
            assert w["path"] == f"./{f.name}" and w["hashes"]["sha256"] == sha256_of(f)
            listed.add(f.name)
    assert listed == set(on_disk)
    from packaging.pylock import Pylock

    Pylock.from_dict(doc).validate()
    assert "mlprobe install --from-lock pylock.toml --find-links . --no-index --apply" in \
        (bundle / "README.md").read_text(encoding="utf-8")


def test_uv_or_pip_reads_the_lock_for_python_3_12(bundle: Path) -> None:
    py = _python312()
    if py is None:
        pytest.skip("no Python 3.12 here to read the lock as that machine's interpreter would")
    uv = find_uv()
    if uv is not None:
        argv = [uv, "pip", "install", "--dry-run", "-r", "pylock.toml", "--python", py, "--no-index",
                "--target", str(bundle.parent / "never")]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=bundle,
                           env={**os.environ, "UV_NO_CACHE": "1"})
        assert r.returncode == 0 and "plaidml-keras==0.7.0" in r.stderr, r.stderr[-2000:]
    else:
        argv = [sys.executable, "-m", "pip", "--python", py, "install", "--dry-run", "-r", "pylock.toml",
                "--no-index"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=bundle)
        assert r.returncode == 0 and "plaidml-keras" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


def test_a_fleet_gets_one_bundle_per_group_of_identical_machines(tmp_path: Path) -> None:
    fleet = ROOT / "fixtures" / "fleet-linux-nvidia-h200-one-node" / "fleet.json"
    out = tmp_path / "fleet-bundles"
    r = subprocess.run([sys.executable, "-m", "mlprobe", "bundle", "--fleet", str(fleet), "--recipe",
                        "plaidml-keras", "-o", str(out), "--json"], capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    index = json.loads((out / "fleet-bundles.json").read_text())
    [one] = index["bundles"]
    assert one["recipe"] == "plaidml-keras" and len(one["nodes"]) == 1 and one["python_version"] == "3.12.3"
    assert (out / one["folder"] / "pylock.toml").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["fleet-bundles"]
