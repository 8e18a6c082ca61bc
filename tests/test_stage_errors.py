"""Stage errors: library code says what happened and what kind of outcome it is; the command layer
maps the kind to the exit status and keeps the reference, text and next step a person sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlprobe.commands.advice import advice
from mlprobe.errors import (EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE,
                            LibraryError, StageError, exit_status)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("kind,code", [("ok", EXIT_OK), ("failure", EXIT_FAILURE), ("usage", EXIT_USAGE),
                                       ("unavailable", EXIT_UNAVAILABLE), ("interrupted", EXIT_INTERRUPTED)])
def test_each_kind_has_its_exit_status(kind: str, code: int) -> None:
    assert exit_status(kind) == code


def test_an_unknown_kind_is_refused_when_raised() -> None:
    with pytest.raises(ValueError):
        StageError("x", kind="oops")
    with pytest.raises(KeyError):
        exit_status("oops")


def test_advice_keeps_text_reference_and_next_step() -> None:
    err = StageError("what went wrong", why="because", next_step="do this", ref="E599", kind="unavailable")
    assert isinstance(err, LibraryError)
    shown = advice(err)
    assert (shown.what, shown.why, shown.next_step, shown.ref, shown.exit_code) == (
        "what went wrong", "because", "do this", "E599", EXIT_UNAVAILABLE)
    assert shown.render() == err.render()


def _cli(*args: str, tmp: Path) -> "subprocess.CompletedProcess[str]":
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp))
    return subprocess.run([sys.executable, "-m", "mlprobe", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=str(tmp))


def test_install_stage_error_reaches_the_cli_as_a_usage_error(tmp_path: Path) -> None:
    # a venv target that is a file: the installer's venv stage refuses it
    target = tmp_path / "not-a-folder"
    target.write_text("x")
    out = _cli("install", "--framework", "torch", "--apply", "--venv", str(target),
               "--index-url", tmp_path.as_uri(), tmp=tmp_path)
    assert out.returncode == EXIT_USAGE, out.stderr
    assert "error [E5" in out.stderr and "Traceback" not in out.stderr


def test_verify_stage_error_reaches_the_cli_with_its_reference(tmp_path: Path) -> None:
    out = _cli("verify", "--python", str(tmp_path / "nope" / "python"), "--json", tmp=tmp_path)
    assert out.returncode == EXIT_USAGE, out.stderr
    err = json.loads(out.stdout)["error"]
    assert (err["ref"], err["exit_code"]) == ("E601", EXIT_USAGE)
    assert err["what"] == f"no Python interpreter at {tmp_path / 'nope' / 'python'}"


def test_fleet_load_stage_error_reaches_the_cli(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = _cli("fleet", "merge", str(bad), tmp=tmp_path)
    assert out.returncode == EXIT_USAGE, out.stderr
    assert "error [E90" in out.stderr and "Traceback" not in out.stderr


def test_a_verify_that_cannot_run_is_noted_in_the_report_by_reference(tmp_path: Path) -> None:
    """The report's verify section: an interpreter gone between the command's check and the run
    is noted with the stage error's reference, and the report still has the rest."""
    from types import SimpleNamespace

    from mlprobe.pipeline import verify_section

    section = verify_section(SimpleNamespace(kind="live"), python=str(tmp_path / "gone" / "python"))  # type: ignore[arg-type]
    note = section.to_json()
    assert note["available"] is False
    assert note["note"] == f"verify failed: [E601] no Python interpreter at {tmp_path / 'gone' / 'python'}"


def test_error_text_of_other_errors_names_their_type() -> None:
    from mlprobe.errors import error_text

    assert error_text(ValueError("bad bundle")) == "ValueError: bad bundle"
    assert error_text(StageError("no index", ref="E501", kind="unavailable")) == "[E501] no index"
