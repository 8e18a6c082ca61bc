"""The dry-run resolution by uv, when uv is the installer --apply will run (install/resolve.py):
its two outputs read as distributions, and the options `uv pip compile` does not take kept away."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mlprobe.install.backends import Sources
from mlprobe.install.resolve import parse_uv_resolution, uv_dry_run
from tests.uv_path import find_uv

COMPILE = "six==1.17.0\nnumpy==2.4.6 \\\n    --hash=sha256:abc\n# via -r -\n"
DRY_RUN = ("Using Python 3.11.7 environment at: v\nResolved 2 packages in 3ms\nWould install 2 packages\n"
           " + goodlib==2.0\n + demo-app==1.0\n - goodlib==1.0\n")


def test_compile_lines_and_dry_run_plus_lines_are_the_distributions() -> None:
    assert [(d.name, d.version) for d in parse_uv_resolution(COMPILE, False)] == [("six", "1.17.0"),
                                                                                ("numpy", "2.4.6")]
    assert [(d.name, d.version) for d in parse_uv_resolution(DRY_RUN, True)] == [("goodlib", "2.0"),
                                                                               ("demo-app", "1.0")]
    assert parse_uv_resolution("Would make no changes\n", True) == []


def test_a_fresh_venv_is_resolved_by_uv_compile_without_install_only_options(tmp_path: Path) -> None:
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
                     dict(os.environ), fresh=True, extra=["--require-hashes", "-r", str(req)])
    assert res.ok, res.output_tail
    got = {d.name: d.version for d in res.dists}
    assert got.get("goodlib") == "2.0" and "demo-app" in got and res.command.startswith(uv)
    assert "--require-hashes" not in res.command
