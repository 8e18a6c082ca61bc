"""MLPROBE_OVERRIDE_* (from the environment, or in a bundle's host.json) changes facts for testing a
plan: every rendering says the fact is overridden, diff does not call it a hardware difference, and
an invalid value is an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest

from mlprobe.errors import EXIT_USAGE

from .conftest import FIXTURES
from .test_cli_errors import bundle, run, user_error

EPYC = FIXTURES / "linux-nogpu-amd-epyc-zen5-mlprobe-capture"


def with_overrides(tmp_path: Path, overrides: Dict[str, str]) -> Path:
    """The EPYC bundle with overrides in its host.json (as a bundle from an odd machine has)."""
    files = {p.name: p.read_bytes() for p in EPYC.iterdir() if p.is_file() and p.name != "SOURCE.md"}
    host = json.loads(files["host.json"])
    host.setdefault("env", {}).update(overrides)
    files["host.json"] = json.dumps(host).encode()
    return bundle(tmp_path / "b", files)


V1 = {"MLPROBE_OVERRIDE_CPU_FLAGS": "sse sse2", "MLPROBE_OVERRIDE_PYTHON_VERSION": "3.8"}


@pytest.mark.parametrize("argv", [["scan"], ["plan"], ["report", "--format", "markdown"]])
def test_every_human_rendering_says_overridden(tmp_path: Path, argv: List[str]) -> None:
    b = with_overrides(tmp_path, V1)
    rc, out, err = run(*argv, "--replay", b)
    assert rc == 0, err
    low = out.lower()
    assert "overridden" in low, out
    if argv[0] == "scan":
        line = next(ln for ln in out.splitlines() if "x86-64-v1" in ln)
        assert "overridden" in line  # said where the overridden fact is shown
    if argv[0] == "plan":
        line = next(ln for ln in out.splitlines() if "Python 3.8" in ln)
        assert "overridden" in line


def test_install_says_its_recipe_was_chosen_for_overridden_facts(tmp_path: Path) -> None:
    """install printed the steps for a recipe planned for Python 3.8 without a word of it."""
    b = with_overrides(tmp_path, V1)
    rc, out, err = run("install", "--replay", b, "--index-url", "http://127.0.0.1:9/simple/")
    assert "overridden: MLPROBE_OVERRIDE_CPU_FLAGS=sse sse2" in err and "chosen for them" in err, err
    rc, out, err = run("install", "--json", "--replay", b, "--index-url", "http://127.0.0.1:9/simple/")
    assert json.loads(out)["overrides"] == V1


def test_json_renderings_carry_the_overrides(tmp_path: Path) -> None:
    b = with_overrides(tmp_path, V1)
    rc, out, _ = run("scan", "--json", "--replay", b)
    assert json.loads(out)["overrides"] == V1
    rc, out, _ = run("plan", "--json", "--replay", b)
    plan = json.loads(out)
    assert plan["target"]["python_source"] == "overridden by MLPROBE_OVERRIDE_PYTHON_VERSION"
    assert any("overridden" in w for w in plan["warnings"])


def test_the_environment_overrides_a_live_style_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLPROBE_OVERRIDE_PYTHON_VERSION", "3.8")
    from mlprobe.scan.host import LiveHost
    from mlprobe.scan.run import facts_to_report, scan

    rep = facts_to_report(scan(LiveHost(), only=["python"]))
    assert rep["python"]["version"] == "3.8" and rep["overrides"]["MLPROBE_OVERRIDE_PYTHON_VERSION"] == "3.8"


def test_diff_does_not_show_overrides_as_hardware_differences(tmp_path: Path) -> None:
    b = with_overrides(tmp_path, V1)
    rc, out, _ = run("diff", "--json", EPYC, b)
    doc = json.loads(out)
    sections = {(d["section"], d["item"]) for d in doc["differences"]}
    assert not any(s == "cpu" for s, _ in sections), sections
    assert ("python", "version") not in sections
    assert ("overrides", "MLPROBE_OVERRIDE_CPU_FLAGS") in sections
    rc, out, _ = run("diff", EPYC, b)
    assert "overrides" in out and "x86_64_level" not in out


@pytest.mark.parametrize("name,value", [
    ("MLPROBE_OVERRIDE_PYTHON_VERSION", "banana"),
    ("MLPROBE_OVERRIDE_PYTHON_VERSION", ""),
    ("MLPROBE_OVERRIDE_PYTHON_VERSION", "3"),
    ("MLPROBE_OVERRIDE_CPU_FLAGS", "avx; rm -rf /"),
    ("MLPROBE_OVERRIDE_CPU_FLAGS", "   "),
    ("MLPROBE_OVERRIDE_CPU_FLAGZ", "avx"),
])
def test_invalid_overrides_are_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                      value: str) -> None:
    b = with_overrides(tmp_path, {name: value})
    rc, _, err = run("scan", "--replay", b)
    user_error(rc, err)
    assert name in err
    monkeypatch.setenv(name, value)  # this machine's environment
    from mlprobe.commands.advice import advice
    from mlprobe.scan.host import LiveHost
    from mlprobe.scan.run import BadOverride, scan

    with pytest.raises(BadOverride) as info:
        scan(LiveHost(), only=["python"])
    shown = advice(info.value)
    assert shown.exit_code == EXIT_USAGE and shown.ref == "E004" and name in shown.what


SCANNING = [["scan"], ["scan", "--json"], ["plan"], ["plan", "--json"], ["report"], ["install"], ["labels"]]


def _cli(argv: List[str], env: Dict[str, str]) -> "tuple[int, str, str]":
    import os
    import subprocess
    import sys

    from .conftest import ROOT

    full = {k: v for k, v in os.environ.items() if not k.startswith("MLPROBE_")}
    full.update(env)
    p = subprocess.run([sys.executable, "-m", "mlprobe", *argv], capture_output=True, text=True, cwd=ROOT,
                       env=full, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("argv", SCANNING)
@pytest.mark.parametrize("where", ["environment", "bundle"])
def test_an_invalid_override_is_exit_2_for_every_command_that_scans(tmp_path: Path, argv: List[str],
                                                                    where: str) -> None:
    name, value = "MLPROBE_OVERRIDE_PYTHON_VERSION", "banana"
    if where == "environment":  # a live scan of this machine
        rc, out, err = _cli(argv, {name: value})
    else:
        rc, out, err = _cli([*argv, "--replay", str(with_overrides(tmp_path, {name: value}))], {})
    assert rc == EXIT_USAGE, (out, err)
    if "--json" in argv:
        assert name in json.loads(out)["error"]["what"] + json.loads(out)["error"].get("why", ""), out
    else:
        assert name in err and "banana" in err, err


@pytest.mark.parametrize("argv,stream", [
    (["scan"], "out"), (["plan"], "out"), (["report", "--format", "markdown"], "out"),
    (["install", "--index-url", "http://127.0.0.1:9/simple/"], "err"), (["labels"], "out"), (["labels"], "err"),
])
def test_overrides_from_the_environment_are_said_in_every_rendering(argv: List[str], stream: str) -> None:
    """The same overrides from this machine's environment (a live scan), not from a bundle."""
    rc, out, err = _cli(argv, V1)
    assert rc in (0, 3), err  # install: 3, the index at port 9 is not there
    text = out if stream == "out" else err
    assert "overridden" in text.lower(), text
    rc, out, _ = _cli(["scan", "--json"], V1)
    assert json.loads(out)["overrides"] == V1


def test_labels_of_a_bundle_with_overrides_say_so(tmp_path: Path) -> None:
    rc, out, err = run("labels", "--replay", with_overrides(tmp_path, V1))
    assert rc == 0, err
    comments = [ln for ln in out.splitlines() if ln.startswith("#")]
    assert any("overridden: MLPROBE_OVERRIDE_CPU_FLAGS=sse sse2" in ln for ln in comments), out
    assert "x86-64-level=1" in out


def test_the_environment_overrides_a_replay_and_says_so(tmp_path: Path) -> None:
    """A live scan honours MLPROBE_OVERRIDE_*; a replay did not, silently. Now it applies, over the
    bundle's own value of the same fact, and stderr names it."""
    env = {"MLPROBE_OVERRIDE_PYTHON_VERSION": "3.8"}
    rc, out, err = _cli(["scan", "--json", "--replay", str(EPYC)], env)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["python"]["version"] == "3.8"
    assert doc["overrides"] == {"MLPROBE_OVERRIDE_PYTHON_VERSION": "3.8"}
    assert "MLPROBE_OVERRIDE_PYTHON_VERSION=3.8 from the environment applies to the replayed bundle" in err
    rc, out, err = _cli(["plan", "--json", "--replay", str(with_overrides(tmp_path, V1))], env | {
        "MLPROBE_OVERRIDE_PYTHON_VERSION": "3.12"})
    assert rc == 0, err
    plan = json.loads(out)
    assert plan["target"]["python"].startswith("3.12")
    assert "over the bundle's own 3.8" in err
    rc, out, err = _cli(["report", "--replay", str(EPYC)], env)
    assert json.loads(out)["scan"]["overrides"] == {"MLPROBE_OVERRIDE_PYTHON_VERSION": "3.8"}


def test_diff_says_it_does_not_apply_the_environment_overrides() -> None:
    """diff compares two machines as their captures hold them: an override from the environment would
    make both alike in that fact, so it is not applied, and stderr says so."""
    env = {"MLPROBE_OVERRIDE_PYTHON_VERSION": "3.9"}
    rc, out, err = _cli(["diff", "--json", str(EPYC), str(EPYC)], env)
    assert rc == 0, err
    assert "MLPROBE_OVERRIDE_PYTHON_VERSION from the environment is not applied by diff" in err
