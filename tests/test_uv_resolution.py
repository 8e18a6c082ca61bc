"""The resolution by uv, when uv is the installer --apply will run (install/resolve.py): one
`uv pip compile --format pylock.toml`, read as distributions with their files, and the options
`uv pip compile` does not take kept away."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mlprobe.errors import ParseError
from mlprobe.install.backends import Sources
from mlprobe.install.resolve import parse_uv_pylock, uv_dry_run
from tests.uv_path import find_uv

# the shape uv 0.13 prints (`uv pip compile - --format pylock.toml --no-header`), one package per kind of file
PYLOCK = '''lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11.7"

[[packages]]
name = "six"
version = "1.17.0"
wheels = [{ url = "http://127.0.0.1:9/files/six-1.17.0-py2.py3-none-any.whl", size = 11050, hashes = { sha256 = "aa" } }]

[[packages]]
name = "goodlib"
version = "2.0"
wheels = [{ url = "file:///w/goodlib-2.0-py3-none-any.whl", hashes = { sha256 = "bb" } }]
'''


def test_uv_pylock_gives_each_file_with_its_size_and_hash() -> None:
    got = parse_uv_pylock(PYLOCK)
    assert [(d.name, d.version, d.filename, d.size, d.sha256) for d in got] == [
        ("six", "1.17.0", "six-1.17.0-py2.py3-none-any.whl", 11050, "aa"),
        ("goodlib", "2.0", "goodlib-2.0-py3-none-any.whl", None, "bb")]
    with pytest.raises(ParseError):
        parse_uv_pylock("lock-version = \"1.0\"\n")
    with pytest.raises(ParseError):
        parse_uv_pylock("six==1.17.0\n")


def test_uv_resolves_once_to_a_lock_without_install_only_options(tmp_path: Path) -> None:
    uv = find_uv()
    if uv is None:
        pytest.skip("uv is not installed")
    from tests.pep503_server import sample_wheels

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    sample_wheels(wheels)
    req = tmp_path / "req.txt"
    req.write_text("goodlib==2.0\n")
    res = uv_dry_run(uv, os.sys.executable, ["demo-app"], Sources(no_index=True, find_links=(str(wheels),)),
                     dict(os.environ), extra=["--require-hashes", "-r", str(req)])
    assert res.ok, res.output_tail
    got = {d.name: d.version for d in res.dists}
    assert got == {"goodlib": "2.0", "demo-app": "1.0"} and res.command.startswith(uv)
    assert "--require-hashes" not in res.command and "pylock.toml" in res.command
    assert res.tool == "uv" and res.lock_text is not None and res.hashed
    assert [d.name for d in res.dists if d.requested] == ["demo-app"]
    # a local folder's sizes come from the disk (uv's lock has none for file: URLs)
    from mlprobe.install.resolve import fill_sizes

    fill_sizes(res.dists, {})
    assert res.sizes_known and all(d.size and d.size > 0 for d in res.dists)
    assert 0.0 < res.seconds < 60.0
