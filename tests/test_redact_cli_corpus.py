"""The credential corpus of test_redact_corpus, checked through the real `mlprobe report` command (a
child process, as a user runs it): JSON and Markdown on standard output with `--include-raw`, and
the files `-o FILE.json` / `-o FILE.md` write, for values planted in each capture kind (text, JSON,
XML) and in the environment. detect-secrets' plugins are checked beside the context rules: each
format below is caught only by a plugin, so the report must be redacted by the plugins too."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from mlprobe.report import detect
from mlprobe.report.redact import Redactor

from .conftest import ROOT
from .test_redact_corpus import FORMATS, forms, plant

pytestmark = pytest.mark.slow


def mlprobe(*argv: str) -> str:
    p = subprocess.run([sys.executable, "-m", "mlprobe", *argv], capture_output=True, text=True,
                       encoding="utf-8", cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    return p.stdout


def outputs(tmp_path: Path, bundle: Path) -> Dict[str, str]:
    """Every rendering a user can get of the report of `bundle`."""
    b = str(bundle)
    out = {
        "json stdout --include-raw": mlprobe("report", "--replay", b, "--include-raw"),
        "markdown stdout --include-raw": mlprobe("report", "--replay", b, "--include-raw", "--format", "markdown"),
    }
    mlprobe("report", "--replay", b, "-o", str(tmp_path / "r.json"))
    mlprobe("report", "--replay", b, "--include-raw", "-o", str(tmp_path / "r.md"))
    out["-o FILE.json"] = (tmp_path / "r.json").read_text(encoding="utf-8")
    out["-o FILE.md --include-raw"] = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert out["-o FILE.md --include-raw"].lstrip().startswith("#"), "-o FILE.md is not Markdown"
    json.loads(out["-o FILE.json"])
    assert json.loads(out["json stdout --include-raw"])["capture_bundle"]["files"]
    return out


def leak_forms(value: str) -> List[str]:
    """The value as a document can show it (itself, JSON/XML/Markdown-escaped), and for a long value
    its middle 16 characters, so that a value cut short in a table cell still counts as a leak."""
    found = set(forms(value)) | {value.replace("|", "\\|")}
    if len(value) >= 24:
        mid = len(value) // 2
        found.add(value[mid - 8: mid + 8])
    return sorted(found)


@pytest.mark.parametrize("kind", ["text", "json", "xml", "env"])
def test_no_planted_credential_survives_the_real_report_command(tmp_path: Path, kind: str) -> None:
    b = plant(tmp_path, kind)
    leaks = []
    for where, text in outputs(tmp_path, b).items():
        for name, _text, values in FORMATS:
            for v in values:
                if any(f in text for f in leak_forms(v)):
                    leaks.append(f"{name} ({kind}) in {where}: {v[:20]}...")
    assert not leaks, "\n".join(leaks)


# -- detect-secrets' plugins beside the context rules ------------------------------------------------

RNG = random.Random(2026)


def _r(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


HEX = "0123456789abcdef"
# Tokens with no secret-sounding name around them: only their shape says what they are.
PLUGIN_ONLY = {
    "Discord bot token": "M" + _r(23) + "." + _r(6) + "." + _r(27),
    "Square OAuth secret": "sq0csp-" + _r(43, string.ascii_letters + string.digits + "-_"),
    "Twilio account SID": "AC" + _r(32, HEX),
    "Twilio API key": "SK" + _r(32, HEX),
    "Telegram bot token": _r(9, string.digits) + ":AA" + _r(33),
    "Mailchimp API key": _r(32, HEX) + "-us12",
    # (an Azure `AccountKey=` of any length is caught by mlprobe's own connection-string rule now:
    # test_redact_corpus plants one of 44 characters, which the plugin's 88-character shape misses)
}


def test_the_detect_secrets_plugins_are_loaded() -> None:
    names = {type(d).__name__ for d in detect._load_detectors()}
    assert {"DiscordBotTokenDetector", "SquareOAuthDetector", "TwilioKeyDetector", "TelegramBotTokenDetector",
            "MailchimpDetector", "AzureStorageKeyDetector", "AWSKeyDetector", "StripeDetector"} <= names


@pytest.mark.parametrize("name", sorted(PLUGIN_ONLY))
def test_plugins_catch_what_the_context_rules_alone_miss(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    token = PLUGIN_ONLY[name]
    secret = token.split("=", 1)[1] if token.startswith("AccountKey=") else token
    line = f"worker 3 started with {token} at 12:00\n"
    assert secret not in Redactor().redact_text(line), "the plugins missed it"
    assert secret not in Redactor().redact_text(json.dumps({"note": line}), mode="json")
    monkeypatch.setattr(detect, "_detectors", [])  # the context and shape rules alone
    assert secret in Redactor().redact_text(line), "the context rules catch it too: not a plugin-only case"


def test_plugin_only_tokens_are_redacted_by_the_real_report_command(tmp_path: Path) -> None:
    b = plant(tmp_path, "none")
    with open(b / "nvidia-smi.txt", "a", encoding="utf-8") as fh:
        fh.write("\n" + "\n".join(f"worker {i} started with {t}" for i, t in enumerate(PLUGIN_ONLY.values())) + "\n")
    out = mlprobe("report", "--replay", str(b), "--include-raw")
    md = mlprobe("report", "--replay", str(b), "--include-raw", "--format", "markdown")
    for name, token in PLUGIN_ONLY.items():
        secret = token.split("=", 1)[1] if token.startswith("AccountKey=") else token
        assert secret not in out and secret not in md, name
    assert "<secret-" in json.loads(out)["capture_bundle"]["files"]["nvidia-smi.txt"]["text"]
