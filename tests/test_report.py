"""`mlprobe report`: the versioned envelope, redaction of every format, replay of the embedded bundle,
and the live acceptance test (no host name, user name or home directory of this machine)."""

from __future__ import annotations

import base64
import getpass
import json
import re
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List

import jsonschema
import pytest

from mlprobe import __version__
from mlprobe.cli import main
from mlprobe.scan.host import LiveHost, ReplayHost
from tests.report_doc import build_report, markdown, verify_doc
from mlprobe.report.envelope import REPORT_SCHEMA, ReportOptions, collect_bundle, report_schema
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES, fixture_dirs
from .test_redact import SYNTHETIC, planted

FACT_KEYS = (
    "os",
    "cpu",
    "memory",
    "python",
    "gpus",
    "runtimes",
    "frameworks",
    "usb_accelerators",
    "warnings",
    "overrides",
)


def report_file(doc: Dict[str, Any], tmp_path: Path, name: str = "report.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def replay_report(path: Path) -> Dict[str, Any]:
    return facts_to_report(scan(ReplayHost(path)))


def mask_identity(gpus: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    # UUIDs and serials are redacted, a MIG device's MIG- UUID too; its profile and index stay
    return [{k: ([{"profile": m.get("profile"), "index": m.get("index")} for m in v] if k == "mig" else v)
             for k, v in g.items() if k not in ("uuid", "serial")} for g in gpus]


# -- the envelope ----------------------------------------------------------------------------------


def test_envelope_is_versioned_and_complete(tmp_path: Path) -> None:
    folder = FIXTURES / "synthetic-linux-nvidia-secrets"
    doc = build_report(ReplayHost(folder), ReportOptions(include_raw=True), source={"kind": "replay"})
    assert doc["schema"] == REPORT_SCHEMA == "mlprobe.report/2"
    assert doc["kind"] == "mlprobe-report"
    assert doc["mlprobe_version"] == __version__
    when = datetime.fromisoformat(doc["generated_at"].replace("Z", "+00:00"))
    assert when.tzinfo is not None and when.utcoffset() == timezone.utc.utcoffset(when)
    assert abs((datetime.now(timezone.utc) - when).total_seconds()) < 300
    assert doc["scan"]["schema"] == "mlprobe.scan/2" and doc["scan"]["gpus"]
    assert isinstance(doc["plan"], dict)
    assert "verify" not in doc
    red = doc["redactions"]
    assert red["enabled"] is True and red["total"] > 0
    assert {"host", "user", "secret", "ip", "gpu-uuid", "serial"} <= set(red["kinds"])
    files = doc["capture_bundle"]["files"]
    assert set(files) == {p.name for p in folder.iterdir() if p.name != "SOURCE.md"}
    assert all(set(e) == {"text"} for e in files.values())
    json.dumps(doc)  # JSON-ready throughout


@pytest.mark.parametrize("folder", SYNTHETIC, ids=[p.name for p in SYNTHETIC])
@pytest.mark.parametrize(
    "options",
    [
        ReportOptions(),
        ReportOptions(include_raw=True, verify=True),
        ReportOptions(include_raw=True, redact=False),
    ],
    ids=["plain", "raw", "no-redact"],
)
def test_envelope_follows_its_schema(
    folder: Path, options: ReportOptions, scan_schema: Dict[str, Any]
) -> None:
    """Contract test: the envelope against report.schema.json, its scan against the scan schema."""
    doc = build_report(ReplayHost(folder), options)
    jsonschema.validate(doc, report_schema())
    jsonschema.validate(doc["scan"], scan_schema)


def test_without_include_raw_there_is_no_bundle() -> None:
    doc = build_report(ReplayHost(FIXTURES / "linux-nvidia-rtx3060-smi-xml"))
    assert "capture_bundle" not in doc


@pytest.mark.parametrize("folder", SYNTHETIC, ids=[p.name for p in SYNTHETIC])
def test_planted_secrets_appear_in_no_output_format(folder: Path, tmp_path: Path) -> None:
    """Acceptance: none of the planted secrets appears in any output format."""
    secrets = planted(folder)
    outputs: Dict[str, str] = {}
    for raw in (False, True):
        doc = build_report(
            ReplayHost(folder),
            ReportOptions(include_raw=raw, verify=True),
            source={"kind": "replay", "bundle": str(folder)},
        )
        outputs[f"json raw={raw}"] = json.dumps(doc, ensure_ascii=False)
        outputs[f"json-ascii raw={raw}"] = json.dumps(doc)
        outputs[f"markdown raw={raw}"] = markdown(doc)
        if raw:
            outputs["replayed scan"] = json.dumps(replay_report(report_file(doc, tmp_path)))
    for label, text in outputs.items():
        low = text.lower()
        for s in secrets:
            assert s.lower() not in low, f"{s!r} appears in the {label} output"


@pytest.mark.parametrize("folder", fixture_dirs(), ids=[d.name for d in fixture_dirs()])
def test_redacted_report_replays_to_the_same_facts(folder: Path, tmp_path: Path) -> None:
    """Acceptance: replaying the redacted report gives the same CPU, GPU and driver facts, both as
    the report states them and as the original bundle has them (GPU UUIDs and serials aside)."""
    original = facts_to_report(scan(ReplayHost(folder)))
    doc = build_report(ReplayHost(folder), ReportOptions(include_raw=True))
    replayed = replay_report(report_file(doc, tmp_path))
    for key in FACT_KEYS:
        if key == "gpus":  # an id derived from a redacted serial (amd-smi's GPU-<hex>) cannot come back
            assert mask_identity(replayed["gpus"]) == mask_identity(doc["scan"]["gpus"]), key
            continue
        assert replayed.get(key) == doc["scan"].get(key), key
    assert replayed["cpu"] == original["cpu"]
    assert replayed["runtimes"] == original["runtimes"]
    assert mask_identity(replayed["gpus"]) == mask_identity(original["gpus"])
    assert [g.get("driver_version") for g in replayed["gpus"]] == [
        g.get("driver_version") for g in original["gpus"]
    ]
    for g in replayed["gpus"]:  # ids keep their shape, so they still identify the same device
        if g.get("uuid"):
            assert re.fullmatch(r"(GPU|MIG)-[0-9a-f-]+", g["uuid"]), g["uuid"]


def test_no_redact_keeps_everything_and_says_so(tmp_path: Path) -> None:
    folder = FIXTURES / "synthetic-linux-nvidia-secrets"
    doc = build_report(ReplayHost(folder), ReportOptions(include_raw=True, redact=False))
    assert doc["redactions"]["enabled"] is False and "NOT REDACTED" in doc["redactions"]["note"]
    text = json.dumps(doc)
    assert "mkowalczyk" in text and "zephyr-lab-07" in text
    for name, entry in doc["capture_bundle"]["files"].items():
        assert entry["text"].encode("utf-8") == (folder / name).read_bytes(), name
    replayed, original = replay_report(report_file(doc, tmp_path)), facts_to_report(scan(ReplayHost(folder)))
    for key in FACT_KEYS:
        assert replayed[key] == original[key], key
    assert replayed["gpus"][0]["uuid"] == "GPU-5b3e9a71-c2d4-4f8e-9a6b-1d7c3e5f2a90"
    md = markdown(doc)
    assert "NOT redacted" in md


def test_binary_captures_travel_as_base64_when_not_redacted(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    bundle.mkdir()
    data = b"processor\t: 0\nmodel name\t: \xff\xfe odd bytes\n"
    (bundle / "proc-cpuinfo.txt").write_bytes(data)
    raw = build_report(ReplayHost(bundle), ReportOptions(include_raw=True, redact=False))
    entry = raw["capture_bundle"]["files"]["proc-cpuinfo.txt"]
    assert base64.b64decode(entry["base64"]) == data
    assert ReplayHost(report_file(raw, tmp_path)).get("proc-cpuinfo.txt").data == data
    red = build_report(ReplayHost(bundle), ReportOptions(include_raw=True))
    assert "text" in red["capture_bundle"]["files"]["proc-cpuinfo.txt"]


def test_plan_failure_degrades_to_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    import mlprobe.plan.planner as plan_mod

    def boom(report: Dict[str, Any], framework: str = "any", **kwargs: Any) -> Dict[str, Any]:
        raise RuntimeError("planner exploded")

    monkeypatch.setattr(plan_mod, "build_plan", boom)
    doc = build_report(ReplayHost(FIXTURES / "linux-nvidia-rtx3060-smi-xml"))
    assert doc["plan"]["available"] is False and "planner exploded" in doc["plan"]["note"]
    assert any("planner exploded" in n for n in doc["notes"])
    assert "planner exploded" in markdown(doc)


def test_plan_is_made_from_the_scan_and_redacted() -> None:
    doc = build_report(ReplayHost(FIXTURES / "synthetic-linux-nvidia-secrets"))
    assert doc["plan"]["top"]["torch"] == "torch-cuda"
    assert "mkowalczyk" not in json.dumps(doc["plan"])


def test_verify_is_skipped_for_a_replay() -> None:
    doc = build_report(ReplayHost(FIXTURES / "linux-nvidia-rtx3060-smi-xml"), ReportOptions(verify=True))
    assert doc["verify"]["available"] is False and "replayed" in doc["verify"]["note"]


def test_verify_results_are_included_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    import mlprobe.verify.runner as runner

    home = str(Path.home())
    base = verify_doc()
    result = dict(base["results"][0], framework="torch", device="cpu", kind="cpu", verdict="works",
                  speedup_vs_best_cpu=1.0)
    fake = verify_doc(python=dict(base["python"], executable=f"{home}/venv/bin/python"), results=[result],
                      summary=[f"torch in {home}/venv works"])
    from mlprobe.model.verify import VerifyResult

    monkeypatch.setattr(runner, "verify", lambda: VerifyResult.from_json(fake))
    doc = build_report(LiveHost(), ReportOptions(verify=True))
    assert doc["verify"]["results"][0]["verdict"] == "works"
    from mlprobe.report.patterns import SYSTEM_HOMES

    if home in SYSTEM_HOMES:  # root's /root names no person: kept (tests/test_redact_system_accounts.py)
        assert f"{home}/venv/bin/python" in json.dumps(doc["verify"])
    else:
        assert home not in json.dumps(doc["verify"])
    md = markdown(doc)
    assert "torch on cpu: **works**" in md


def test_verify_failure_degrades_to_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    import mlprobe.verify.runner as runner

    def boom() -> Dict[str, Any]:
        raise OSError("no interpreter")

    monkeypatch.setattr(runner, "verify", boom)
    doc = build_report(LiveHost(), ReportOptions(verify=True))
    assert doc["verify"]["available"] is False and "no interpreter" in doc["verify"]["note"]


def test_collect_bundle_of_a_replay_keeps_only_captures() -> None:
    files = collect_bundle(ReplayHost(FIXTURES / "linux-amd-mi300x-x4-rocminfo-rocm-smi"))
    assert set(files) == {"rocminfo.txt", "rocm-smi.txt"}  # not SOURCE.md, not rocm-smi-a.txt


# -- the command -----------------------------------------------------------------------------------


def test_cli_report_then_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = FIXTURES / "synthetic-linux-wsl2-amd-secrets"
    out = tmp_path / "r.json"
    assert main(["report", "--replay", str(folder), "--include-raw", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "redacted:" in err and f"mlprobe scan --replay {out}" in err
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["schema"] == "mlprobe.report/2"
    assert main(["scan", "--replay", str(out), "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    for key in FACT_KEYS:
        assert replayed[key] == doc["scan"][key], key


def test_cli_markdown_by_extension_and_no_redact_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = FIXTURES / "synthetic-darwin-secrets"
    md = tmp_path / "r.md"
    assert main(["report", "--replay", str(folder), "-o", str(md)]) == 0
    assert md.read_text(encoding="utf-8").startswith("### mlprobe report")
    capsys.readouterr()
    assert main(["report", "--replay", str(folder), "--no-redact", "--format", "markdown"]) == 0
    captured = capsys.readouterr()
    assert "NOT redacted" in captured.err and "ebrightwater" in captured.out
    assert "**This report is NOT redacted**" in captured.out


# -- live: this machine's names never leave it -----------------------------------------------------


def _token(value: str) -> "re.Pattern[str]":
    return re.compile(rf"(?i)(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])")


@pytest.fixture(scope="module")
def live_outputs() -> Dict[str, str]:
    host = LiveHost()
    doc = build_report(host, ReportOptions(include_raw=True), source={"kind": "live"})
    plain = build_report(host, ReportOptions(), source={"kind": "live"})
    return {
        "json": json.dumps(doc, ensure_ascii=False),
        "markdown": markdown(doc),
        "json-ascii": json.dumps(doc),
        "json without raw": json.dumps(plain, ensure_ascii=False),
        "markdown without raw": markdown(plain),
    }


def test_live_report_has_no_host_user_or_home(live_outputs: Dict[str, str]) -> None:
    """Acceptance: here, the report contains neither the host name, the user name, nor the home
    directory (as whole words: the host `vm` may well be part of a CPU flag like `vmx`)."""
    from mlprobe.report.patterns import SYSTEM_HOMES, is_system_account

    host, user, home = socket.gethostname(), getpass.getuser(), str(Path.home())
    assert host and user and home
    # a system account (root, as in a container) and its home are no personal data: kept
    personal_user, personal_home = not is_system_account(user), home not in SYSTEM_HOMES
    for label, text in live_outputs.items():
        assert not _token(host).search(text), f"host name {host!r} in the {label} report"
        assert not _token(host.split(".")[0]).search(text), f"host name {host!r} in the {label} report"
        assert not personal_user or not _token(user).search(text), f"user name {user!r} in the {label} report"
        assert not personal_home or not re.search(rf"(?<![\w.-]){re.escape(home)}(?![\w.-])", text), (
            f"home {home!r} in the {label} report"
        )


def test_live_report_still_replays(live_outputs: Dict[str, str], tmp_path: Path) -> None:
    doc = json.loads(live_outputs["json"])
    replayed = replay_report(report_file(doc, tmp_path))
    assert replayed["cpu"] == doc["scan"]["cpu"]
    assert replayed["gpus"] == doc["scan"]["gpus"]
    assert replayed["os"]["system"] == doc["scan"]["os"]["system"]
