"""What redaction recognises without a Redactor's state: host names in known_hosts lines, values that
look secret by name but are not (booleans, placeholders, paths), and detect-secrets' shape detectors
(imported on first use; without detect-secrets the context and shape rules of redact.py still apply)."""

from __future__ import annotations

import re
from typing import Any, Iterator, List, Optional, Set, Tuple

from .patterns import (ARN_ACCOUNT, CLOUD_NUMERIC_ID, DISK_BY_ID, GENERIC_NAMES, IPV4, KNOWN_HOSTS, SN_LINE,
                       SSH_HOSTNAME, is_null)


_ANY_CASE_HINTS = ("pass", "secret", "token", "key", "credential", "auth")
_BRACKETED = re.compile(r"^\[(?P<h>[^\]]+)\](?::\d+)?$")


def known_hosts(text: str) -> Iterator[Tuple[int, int, str]]:
    """(start, end, host) of each host name in known_hosts lines (`a.corp,b.corp,[c.lab]:2222 ssh-ed25519
    AAAA...`); addresses are left to the address rules, hashed entries (`|1|...`) name no host."""
    if "AAAA" not in text:
        return
    for m in KNOWN_HOSTS.finditer(text):
        pos = m.start("hosts")
        for part in m.group("hosts").split(","):
            start = pos
            pos += len(part) + 1
            name = part.lstrip("!")
            start += len(part) - len(name)
            b = _BRACKETED.match(name)
            if b:
                start += 1
                name = b.group("h")
            low = name.lower()
            if not name or is_null(name) or low in GENERIC_NAMES or IPV4.fullmatch(name) or ":" in name \
                    or not re.search(r"[A-Za-z]", name):
                continue
            yield start, start + len(name), name


def _harmless(value: str) -> bool:
    """Values after a secret-looking name that are not secrets: booleans, placeholders, a
    reference to another variable, a file path."""
    v = value.strip().lower()
    return (v in ("true", "false", "yes", "no", "on", "off", "null", "none", "required", "optional",
                  "set", "unset", "********", "***")
            or v.startswith(("$", "%", "${", "<", "/", "~/", "./"))
            or bool(re.fullmatch(r"\d{1,3}", v)))


# detect-secrets' detectors that recognise a token by its shape alone. Those that need a keyword
# (our context rules do that), the high-entropy ones (hashes and ids in captures are high-entropy
# too), the public-IP one (addresses have their own kind) and basic-auth URLs (URL_CRED) are left out.
# Text without any of their distinctive marks skips them (and their import) altogether.
_CANDIDATE = re.compile(
    r"A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA|AKC|cmVmdGtu|AccountKey=|[MNO][A-Za-z\d_-]{23,25}\.|gh[pousr]_|"
    r"gl(?:pat|dt|ft|soat|rt|cbt|imt)-|GR1348941|eyJ|-us\d|_authToken|sk-|pypi-|SG\.|xox|hooks\.slack|"
    r"sq0csp-|k_live_|\d{8,10}:[0-9A-Za-z_-]{35}|(?:AC|SK)[a-z0-9]{32}"
)
_DETECTORS = (
    ("artifactory", "ArtifactoryDetector"), ("aws", "AWSKeyDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"),
    ("discord", "DiscordBotTokenDetector"), ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"), ("jwt", "JwtTokenDetector"), ("mailchimp", "MailchimpDetector"),
    ("npm", "NpmDetector"), ("openai", "OpenAIDetector"), ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"), ("slack", "SlackDetector"), ("square_oauth", "SquareOAuthDetector"),
    ("stripe", "StripeDetector"), ("telegram_token", "TelegramBotTokenDetector"), ("twilio", "TwilioKeyDetector"),
)
_detectors: Optional[List[Any]] = None


def _load_detectors() -> List[Any]:
    """The detect-secrets plugins, imported on first use (about 0.14 s; only `mlprobe report` redacts).
    Without detect-secrets installed, the context and shape rules of this module still apply."""
    global _detectors
    if _detectors is None:
        import importlib

        found = []
        for module, cls in _DETECTORS:
            try:
                found.append(getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)())
            except Exception:  # not installed, or a release without this detector
                continue
        _detectors = found
    return _detectors


def detect_secret_values(text: str) -> Set[str]:
    """Secret values detect-secrets' shape detectors find in `text` (at least 8 characters)."""
    out: Set[str] = set()
    if len(text) < 16 or not _CANDIDATE.search(text):
        return out
    for det in _load_detectors():
        try:
            for value in det.analyze_string(text):
                if isinstance(value, str) and len(value) >= 8:
                    out.add(value)
        except Exception:  # a detector's bug must not cost the report
            continue
    return out


def disk_and_cloud_ids(text: str) -> Iterator[Tuple[int, int, str, str]]:
    """(start, end, kind, value): disk serials inside /dev/disk/by-id names and `SN: …` lines, the AWS
    account of an ARN, a cloud instance's numeric JSON id, an ssh_config HostName (kind "host": the
    caller turns it into its host key)."""
    if "-" in text:
        for m in DISK_BY_ID.finditer(text):
            g = "v" if m.group("v") is not None else "v2"
            if not is_null(m.group(g)):
                yield m.start(g), m.end(g), "serial", m.group(g).lower()
    if "SN" in text or "S/N" in text:
        for m in SN_LINE.finditer(text):
            if not is_null(m.group("v")):
                yield m.start("v"), m.end("v"), "serial", m.group("v").lower()
    if "arn:" in text:
        for m in ARN_ACCOUNT.finditer(text):
            yield m.start("v"), m.end("v"), "machine-id", m.group("v")
    if '"' in text:
        for m in CLOUD_NUMERIC_ID.finditer(text):
            yield m.start("v"), m.end("v"), "machine-id", m.group("v")
    if "ostName" in text or "ostname" in text:
        for m in SSH_HOSTNAME.finditer(text):
            if not is_null(m.group("v")):
                yield m.start("v"), m.end("v"), "host", m.group("v")
