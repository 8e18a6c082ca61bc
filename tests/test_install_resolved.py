"""`install --apply` installs exactly the resolution it showed (install/apply.py, resolve.py): uv's
pylock.toml or pip's report, resolved once. A newer version published between the pre-flight and the
install does not land; the venv uv makes has pip; the lock is the resolution's; sizes are one line
when the sources do not say them. Real pip and uv against a local index (127.0.0.1), offline."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path
from typing import Dict, Iterator

import pytest

from mlprobe.install.apply import apply, prepare
from mlprobe.install.lock import read_lock
from mlprobe.install.steps import InstallOptions, build_plan
from mlprobe.model.plan import Recommendation
from tests.pep503_server import IndexConfig, LocalIndex, build_wheel, pip_freeze
from tests.uv_path import UV_DIR

pytestmark = pytest.mark.slow  # real venvs and installs: about 10 s each


@pytest.fixture()
def wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    build_wheel(folder, "goodlib", "1.0")
    build_wheel(folder, "goodlib", "2.0")
    build_wheel(folder, "demo-app", "1.0", requires=["goodlib>=2"])
    return folder


@pytest.fixture()
def index(wheels: Path) -> Iterator[LocalIndex]:
    with LocalIndex(wheels, IndexConfig(), max_requests=3000, lifetime_s=240) as idx:
        yield idx


@pytest.fixture()
def uv_at_the_end_of_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """uv findable (shutil.which) without its folder's python shadowing this one."""
    if UV_DIR is None:
        pytest.skip("uv is not installed")
    monkeypatch.setenv("PATH", os.environ.get("PATH", "") + os.pathsep + UV_DIR)


def _rec() -> Recommendation:
    return Recommendation.from_json({"recipe": "demo", "title": "a demo recipe", "framework": "demo",
                                     "packages": ["demo-app"], "imports": ["demo_app"]})


def _installed(python: Path) -> Dict[str, str]:
    out = {}
    for line in pip_freeze(python).splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            out[name.lower().replace("_", "-")] = version
    return out


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_what_is_shown_is_what_is_installed_even_when_the_index_moves_on(
        installer: str, tmp_path: Path, index: LocalIndex, wheels: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if installer == "uv":
        request.getfixturevalue("uv_at_the_end_of_path")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    venv = tmp_path / "env"
    opts = InstallOptions(index_url=index.url, apply=True, venv=venv, installer=installer, verify=False,
                          log=tmp_path / "install.log")
    pre = prepare(build_plan(_rec(), opts), opts)
    assert pre.ok, [p.render() for p in pre.problems]
    assert pre.resolution is not None and pre.resolution.tool == installer
    shown = {d.name.lower(): d.version for d in pre.resolution.dists}
    assert shown == {"demo-app": "1.0", "goodlib": "2.0"}
    assert pre.resolution.hashed and pre.resolution.sizes_known  # the JSON page's sha256 and PEP 700 size
    assert pre.resolution.seconds > 0.0
    # published after the resolution was shown: a second resolution would take it
    build_wheel(wheels, "goodlib", "3.0")
    result = apply(pre, opts)
    python = venv / "bin" / "python"
    installed = _installed(python)
    assert {k: installed.get(k) for k in shown} == shown, installed
    assert installed.get("goodlib") == "2.0"
    # the lock is the resolution: the same files, hashes and sizes the index gave
    assert result.lock is not None, result.lock_error
    lock = read_lock(Path(result.lock))
    got = {p.name: (str(p.version), p.wheels[0].hashes["sha256"], p.wheels[0].size) for p in lock.packages}
    want = {d.name.lower(): (d.version, d.sha256, d.size) for d in pre.resolution.dists}
    assert got == want
    assert not [r for r in index.requests if "goodlib-3.0" in r]  # nothing looked at the newer file
    log = (tmp_path / "install.log").read_text()
    # pip is in the venv (the pins are a pip constraint in its pip.conf: a later `pip install` needs pip)
    cp = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0 and str(venv) in cp.stdout, cp.stderr
    if installer == "uv":
        assert "uv venv" in log and " -m venv " not in log
    else:  # no ensurepip: pip's wheel went in with the install of the resolution
        assert " -m venv --without-pip " in log


def test_sizes_the_sources_do_not_say_are_one_line_not_a_column(tmp_path: Path, wheels: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # an index without the JSON API (no PEP 700 sizes) and without Content-Length on HEAD: nothing says
    from mlprobe.install import resolve
    from mlprobe.render import install_terminal

    monkeypatch.setattr(resolve, "_head_size", lambda url: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with LocalIndex(wheels, IndexConfig(json_api=False), max_requests=3000, lifetime_s=240) as idx:
        opts = InstallOptions(index_url=idx.url, venv=tmp_path / "env", installer="pip")
        pre = prepare(build_plan(_rec(), opts), opts)
    assert pre.ok and pre.resolution is not None and pre.resolution.dists
    assert pre.resolution.unknown_sizes == len(pre.resolution.dists)
    from rich.console import Console

    buf = io.StringIO()
    monkeypatch.setattr(install_terminal, "_console",
                        lambda *a, **k: Console(file=buf, width=200, color_system=None, highlight=False))
    install_terminal.render_preflight(pre)
    text = buf.getvalue()
    assert "sizes unknown" in text and "?" not in text, text
    assert "resolved by pip in 0.0 s" not in text
