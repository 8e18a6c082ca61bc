"""Every value a setting may hold comes back unchanged from every place settings go: each activate
flavour (sh, fish, csh, PowerShell, cmd's activate.bat), the start-up hook and the kernel spec. A
real shell reads the POSIX script (sh, bash, and fish, csh or tcsh when installed); the others are
read by parsers that follow their shell's quoting rules (PowerShell also ends a single-quoted string
at the typographic quotes U+2018-U+201B). A value one place cannot hold is refused for all of them
before anything is written, and install never says a setting was written that was not."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from mlprobe.errors import StageError
from mlprobe.install import settings
from mlprobe.venvconf import activate, kernelspec

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX venv layout and shells")

VALUES = ["plain", "it's", "two  spaces", "$HOME", "`id`", "$(id)", "back\\slash", "trailing\\", "50%",
          "%PATH%", "!bang", "semi;colon & pipe | <in >out", "\u2019smart\u2018 quotes\u201a\u201b", "tab\there",
          "unicode \u00e9 \u2713", "*glob?[x]", "{brace}", "~tilde", "#hash", "(paren)", "''", "\\'", "a'\\''b",
          "^caret", "=equals=", ""]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("flavours") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True,
                   timeout=300)
    return where


def _env_of(values: "list[str]") -> Dict[str, str]:
    return {f"MLPROBE_T{i}": v for i, v in enumerate(values)}


@pytest.fixture(scope="module")
def written(venv: Path) -> Dict[str, str]:
    env = _env_of(VALUES)
    (site,) = list(venv.glob("lib/python*/site-packages"))
    for name in ("activate.bat", "deactivate.bat"):  # a Windows venv's; written beside the POSIX ones
        (venv / "bin" / name).write_text("@echo off\r\nset VIRTUAL_ENV=C:\\v\r\n", encoding="utf-8")
    out = settings.write_settings(venv, str(venv / "bin" / "python"), site, env, {}, [], "demo", "demo",
                                  kernel=True)
    assert len(out.activate) == 6 and out.kernels and out.hook
    return env


@pytest.mark.parametrize("shell", ["sh", "bash", "dash"])
def test_a_real_posix_shell_reads_every_value(venv: Path, written: Dict[str, str], shell: str) -> None:
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"no {shell}")
    prog = ". \"$1/bin/activate\"; for k in " + " ".join(written) + "; do eval \"printf '%s\\\\0' \\\"\\$$k\\\"\"; done"
    r = subprocess.run([exe, "-c", prog, shell, str(venv)], capture_output=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    got = r.stdout.decode("utf-8").split("\0")[:-1]
    assert dict(zip(written, got)) == written


@pytest.mark.parametrize("shell,script,prog", [
    ("fish", "activate.fish", "source $argv[1]; for k in $argv[2..-1]; printf '%s\\0' $$k; end"),
])
def test_fish_reads_every_value_when_installed(venv: Path, written: Dict[str, str], shell: str, script: str,
                                               prog: str) -> None:
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"no {shell} on this machine (the parser test below reads its script)")
    r = subprocess.run([exe, "-c", prog, str(venv / "bin" / script), *written], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert dict(zip(written, r.stdout.decode("utf-8").split("\0")[:-1])) == written


@pytest.mark.parametrize("name", ["activate", "activate.fish", "activate.csh", "Activate.ps1", "activate.bat"])
def test_every_flavour_reads_back_as_set(venv: Path, written: Dict[str, str], name: str) -> None:
    text = (venv / "bin" / name).read_bytes().decode("utf-8")
    assert activate.parse_block(name, text) == written


def test_the_start_up_hook_and_the_kernel_spec_give_every_value(venv: Path, written: Dict[str, str]) -> None:
    code = "import os, sys; sys.stdout.write(json.dumps({k: os.environ.get(k) for k in sys.argv[1:]}))"
    r = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", str(venv / "bin" / "python"), "-c",
                        "import json; " + code, *written], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == written
    (spec,) = list((venv / kernelspec.KERNELS).glob("*/kernel.json"))
    doc = json.loads(spec.read_text(encoding="utf-8"))
    assert {k: doc["env"][k] for k in written} == written


def test_powershell_typographic_quotes_are_doubled() -> None:
    """A value with U+2019 written as 'x’y' would end the string at ’ in PowerShell: doubled, and the
    parser (which follows PowerShell) refuses the undoubled form."""
    sets, _ = activate.ps1_block({"K": "x\u2019y"})
    assert "'x\u2019\u2019y'" in sets
    bad = "\n" + activate.BEGIN + "\nif (-not (Test-Path env:K)) { $env:K = 'x\u2019y'; $env:_MLPROBE_SET_K = '1' }\n"
    assert activate.parse_block("Activate.ps1", bad) != {"K": "x\u2019y"}


@pytest.mark.parametrize("value", ["two\nlines", "a\rb", 'say "hi"', "nul\x00"])
def test_a_value_one_place_cannot_hold_is_refused_by_install_for_all_of_them(tmp_path: Path, value: str) -> None:
    where = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True,
                   timeout=300)
    before = {str(p): p.read_bytes() for p in where.rglob("*") if p.is_file()}
    recipe = tmp_path / "r.json"
    recipe.write_text(json.dumps({"recipe": "demo", "title": "demo", "framework": "demo", "packages": ["x"],
                                  "env": {"OK_VAR": "fine", "DEMO_MODE": value}}))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--recipe-file", str(recipe), "--settings-only",
                        "--venv", str(where)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode != 0
    assert "[E560]" in r.stderr and "DEMO_MODE" in r.stderr and "Traceback" not in r.stderr
    assert not re.search(r"written|set at every start", r.stdout + r.stderr.split("[E560]")[0])
    assert {str(p): p.read_bytes() for p in where.rglob("*") if p.is_file()} == before
    with pytest.raises(StageError) as e:
        settings.check(where, next(where.glob("lib/python*/site-packages")), {"DEMO_MODE": value}, {}, "demo")
    assert e.value.ref == "E560"
