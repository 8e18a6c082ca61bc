"""Text from captures and documents reaches a terminal only as text: rich markup (`[/bogus]`,
`[link=...]`), raw ESC bytes and OSC 8 hyperlinks in a fact or in a dict key are shown escaped,
never obeyed, and never crash a renderer (rich's MarkupError)."""

from __future__ import annotations

import io
import re
import json
import shutil
from pathlib import Path
from typing import Any, Dict

import pytest
from rich.console import Console

from mlprobe.cli import main
from mlprobe.fleet.merge import merge_reports

from .conftest import FIXTURES

ESC_KEY = "\x1b[2J\x1b[31mred"
OSC8_KEY = "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\"
LINK_KEY = "[link=https://evil.example/]click[/link]"
BOGUS_KEY = "[/bogus]"
HOSTILE_KEYS = [ESC_KEY, OSC8_KEY, LINK_KEY, BOGUS_KEY, "[bold]loud", "trailing\\"]


def terminal() -> "tuple[Console, io.StringIO]":
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=250, color_system="truecolor"), buf


def assert_inert(out: str) -> None:
    assert "\x1b]8" not in out, "an OSC 8 hyperlink reached the terminal"
    assert "\x1b[2J" not in out and "\x1b[31m" not in out, "an escape sequence from the data reached the terminal"


def hostile_fleet(tmp_path: Path) -> Dict[str, Any]:
    from tests.report_doc import build_report
    from mlprobe.report.envelope import ReportOptions
    from mlprobe.scan.host import ReplayHost

    doc = build_report(ReplayHost(FIXTURES / "linux-nvidia-h100-smi"), ReportOptions(),
                       source={"kind": "replay", "bundle": "x"}, now="2026-01-01T00:00:00Z")
    rec = doc["plan"]["recommended"][0]
    for k in HOSTILE_KEYS:
        doc["plan"]["top"][k] = rec["recipe"]
    rec["env"] = {k: "v" for k in HOSTILE_KEYS}
    doc["scan"]["frameworks"].append({"name": BOGUS_KEY, "version": "1.0"})
    p = tmp_path / "node.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    fleet = merge_reports([str(p)], now="2026-01-01T00:00:00Z")
    fleet["summary"]["by_status"].update({k: 1 for k in HOSTILE_KEYS})
    return fleet


def test_fleet_show_with_hostile_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.fleet.render import render_fleet

    fleet = hostile_fleet(tmp_path)
    con, buf = terminal()
    render_fleet(fleet, console=con, all_rows=True)
    out = buf.getvalue()
    assert_inert(out)
    assert "[/bogus]" in out and "[link=https://evil.example/]click[/link]" in out
    assert "\\x1b[2J" in out  # shown, escaped
    # and through the command, from the file
    f = tmp_path / "fleet.json"
    f.write_text(json.dumps(fleet), encoding="utf-8")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["fleet", "show", str(f), "--all"]) == 0
    assert_inert(capsys.readouterr().out)


def h200_named(tmp_path: Path, name: str) -> Path:
    b = tmp_path / "bundle"
    shutil.copytree(FIXTURES / "linux-nvidia-h200-mlprobe-capture", b)
    for p in b.iterdir():
        if p.suffix in (".xml", ".txt", ".csv", ".json") and p.name != "host.json":
            p.write_text(p.read_text(encoding="utf-8").replace("NVIDIA H200", name), encoding="utf-8")
    return b


@pytest.mark.parametrize("name", ["NVIDIA H200 [/x]", "NVIDIA H200 [link=https://evil.example/]x[/link]",
                                  "NVIDIA H200 \\"])
def test_plan_and_scan_render_a_gpu_name_with_markup(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich writes hyperlinks and colours as to a terminal
    b = h200_named(tmp_path, name)
    for argv in (["plan", "--replay", str(b)], ["scan", "--replay", str(b)],
                 ["plan", "--replay", str(b), "--why-not", "plaidml-keras"]):
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        assert_inert(out)
        if "[/x]" in name and argv[0] == "plan" and "--why-not" not in argv:
            assert "NVIDIA H200 [/x]" in re.sub(r"\x1b\[[0-9;]*m", "", out)  # shown as it is, not eaten


def test_verify_renders_device_names_with_markup() -> None:
    from mlprobe.render.verify_terminal import render_verify

    doc = {"python": {"executable": "/x/[/bogus]/python", "version": "3.11"},
           "results": [{"framework": "torch", "framework_version": "2.11[/x]", "device": "cuda:0",
                        "name": "NVIDIA H200 [/x]", "kind": "gpu", "verdict": "ACCELERATED",
                        "speed": {"images_per_s": 100.0}}],
           "summary": ["torch on NVIDIA H200 [/x] [link=https://evil.example/]x[/link]"],
           "frameworks": [{"name": "[/y]", "unavailable_devices": [{"id": "[/z]", "reason": OSC8_KEY}]}],
           "tolerances": {}}
    buf = io.StringIO()
    render_verify(doc, stream=buf)
    out = buf.getvalue()
    assert "NVIDIA H200 [/x]" in out and "[/z]" in out
    assert "\x1b]8" not in out


def test_deep_safe_cleans_keys() -> None:
    from mlprobe import ui

    out = ui.deep_safe({ESC_KEY: {BOGUS_KEY: "x"}, "trailing\\": 1}, markup=True)
    keys = list(out)
    assert "\x1b" not in keys[0] and "\\x1b" in keys[0]
    assert list(out[keys[0]]) == ["\\[/bogus]"]
    from rich.markup import render

    for k in keys:
        render(f"[dim]{k}[/dim]")  # each key is now safe inside markup
