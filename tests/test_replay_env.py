"""MLPROBE_REPLAY=DIR: every command that scans reads that capture bundle instead of this machine,
says so on stderr, and records it in the report's host source; --replay on the command line wins."""

from __future__ import annotations

import json

import pytest

from mlprobe.cli import main

from .conftest import FIXTURES

RX = FIXTURES / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"
H200 = FIXTURES / "linux-nvidia-h200-mlprobe-capture"


def test_scan_reads_the_bundle_and_says_so(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLPROBE_REPLAY", str(RX))
    assert main(["scan", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["source"] == {"kind": "replay", "bundle": str(RX), "via": "MLPROBE_REPLAY"}
    assert [g["gfx_target"] for g in doc["gpus"]] == ["gfx1031"]
    assert "MLPROBE_REPLAY is set" in err


def test_command_line_replay_wins(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLPROBE_REPLAY", str(RX))
    assert main(["scan", "--json", "--replay", str(H200)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == {"kind": "replay", "bundle": str(H200)}
    assert [g["name"] for g in doc["gpus"]] == ["NVIDIA H200"]


def test_report_records_the_replay(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLPROBE_REPLAY", str(H200))
    assert main(["report", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["scan"]["source"]["via"] == "MLPROBE_REPLAY"
    assert doc["plan"]["top"]["torch"] == "torch-cuda"


def test_bad_bundle_is_a_usage_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: object,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLPROBE_REPLAY", str(tmp_path))
    assert main(["scan"]) == 2
    err = capsys.readouterr().err
    assert "E101" in err and "from MLPROBE_REPLAY" in err and "unset MLPROBE_REPLAY" in err


def test_install_apply_refuses_a_replayed_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: object,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLPROBE_REPLAY", str(H200))
    code = main(["install", "--framework", "torch", "--apply", "--venv", f"{tmp_path}/v"])
    assert code == 2
    assert "E512" in capsys.readouterr().err
