"""`mlprobe report --python PY` carries the verify results of another environment (the venv that
`mlprobe install` made), so that a user can attach them to a ticket."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from .test_cli_errors import run, user_error


@pytest.mark.slow
def test_report_python_verifies_that_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlprobe.verify.runner as runner

    seen: Dict[str, Any] = {}

    def fake(python: Any = None, **_k: Any) -> Any:
        seen["python"] = python
        from mlprobe.model.verify import VerifyResult
        from tests.report_doc import verify_doc

        return VerifyResult.from_json(verify_doc(python={"executable": python, "version": "3.11.7"}, results=[],
                                                 exit_code=3, summary=["no framework is importable in this "
                                                                       "interpreter"]))

    monkeypatch.setattr(runner, "verify", fake)
    rc, out, err = run("report", "--python", sys.executable)
    assert rc == 0, err
    doc = json.loads(out)
    assert seen["python"] == sys.executable
    assert "verify" in doc and doc["verify"]["summary"]
    rc, out, err = run("report", "--format", "markdown", "--python", sys.executable)
    assert rc == 0 and "Verify" in out


def test_report_python_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    rc, _, err = run("report", "--python", tmp_path / "nope" / "python")
    user_error(rc, err)


def test_report_python_with_replay_is_a_usage_error() -> None:
    from .conftest import FIXTURES

    rc, _, err = run("report", "--python", sys.executable, "--replay", FIXTURES / "linux-nvidia-h100-smi")
    user_error(rc, err)


@pytest.mark.slow
def test_report_python_of_a_fresh_venv_end_to_end(tmp_path: Path) -> None:
    """A real child: a bare venv has no framework, and the report says so for that interpreter."""
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    rc, out, err = run("report", "--python", py, "--no-redact")
    assert rc == 0, err
    verify = json.loads(out)["verify"]
    assert verify["python"]["executable"] == str(py)
    assert any("No framework" in s for s in verify["summary"])
