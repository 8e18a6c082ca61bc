"""Redaction: personal data out of a report before it is pasted into a public ticket.

Two passes over everything that goes into one report. `learn()` reads every capture for the names
that identify the machine and its user (uname's host field, shell prompts, `Machine name:`,
`SystemName`, /home/NAME, C:\\Users\\NAME, ...); `redact_text()` / `redact_obj()` then replace
them everywhere, together with values that are sensitive by shape or by context (IP and MAC
addresses, GPU UUIDs, serial numbers, machine ids, Windows product ids, secret-looking
environment values). The same value always becomes the same placeholder within one Redactor
(`<host-1>`, `<user-1>`, `<gpu-uuid-2>`), so equalities that the scan relies on (the same GPU UUID
in two captures) survive, and a replay of the redacted captures yields the same facts.

Facts that a replay must reproduce are protected: a learned name that is also a word of a fact
(a host called `ubuntu` on Ubuntu) is replaced only where its context says it is a name, and a
value shaped like an address that is part of a fact (a driver version `2.0.1.0`) is left alone.
"""

from __future__ import annotations

import bisect
import ipaddress
import json
import os
import re
from collections import Counter
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from ..model.report import RedactionCount, Redactions
from ..scan.host import ENV_VARS as SETTINGS_VARS, OVERRIDE_PREFIX
from .patterns import (
    AMD_UUID,
    AUTH_HEADER,
    AWS_INSTANCE,
    BUILDER,
    CLI_HINTS,
    CLI_SECRETS,
    CONN_SECRET,
    CONTAINER_ID,
    EMAIL,
    GENERIC_NAMES,
    GPU_UUID,
    HEX32,
    HOST_KV,
    ID_HINTS,
    ID_KV,
    IPV4,
    IPV6,
    KFD_UNIQUE,
    KINDS,
    LSPCI_DSN,
    LSUSB_SERIAL,
    MAC,
    MAC_TMP,
    NETRC,
    NOT_USERS,
    is_system_account,
    system_names,
    SYSTEM_HOMES,
    POSIX_HOME,
    PRIVATE_KEY_BLOCK,
    PRODUCT_ID,
    PROMPTS,
    SECRET_ASSIGN,
    SECRET_ASSIGN_ANY,
    SECRET_HINTS,
    Span,
    TOKEN_PREFIXES,
    TOKEN_SHAPES,
    UNAME,
    URL_CRED,
    URL_USERS_NOT_SECRET,
    USER_KV,
    UUID,
    WIN_HOME,
    WIN_SID,
    XML_ID,
    classify_id,
    csv_cells,
    is_null,
    is_secret_name,
    is_version_key,
    json_string,
    json_strings,
    json_walk,
    key_hint,
    looks_like_version,
    looks_secret,
    mode_for,
    shaped,
    text_of,
)
from .detect import _ANY_CASE_HINTS, _harmless, detect_secret_values, disk_and_cloud_ids, known_hosts


_CLOUD_ID_KEYS = frozenset(("id", "instance_id", "instanceid", "numeric_id", "numericid"))
_BARE_VERSION = re.compile(r"v?\d+(?:\.\d+){1,5}(?:[+.-][\w.+-]*)?")
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")


class Redactor:
    """Learns identifying values, then replaces them (and shape-sensitive values) consistently."""

    def __init__(self, protected: Iterable[str] = (), enabled: bool = True) -> None:
        self.enabled = enabled
        self._map: Dict[Tuple[str, str], str] = {}
        self._next: Counter[str] = Counter()
        self._occurrences: Counter[str] = Counter()
        # learned names: lowercase spelling -> (kind, key)
        self._names: Dict[str, Tuple[str, str]] = {}
        self._authoritative: Set[str] = set()  # live seeds: replaced even when generic
        self._system: Set[str] = set()  # system accounts and groups learned from `id` output
        self._homes: Dict[str, str] = {}  # lowercase normalised -> key
        # ids seen in a context (a serial after "Serial Number:", a GPU UUID, ...): replaced
        # wherever else they occur, even without the context
        self._ids: Dict[str, Tuple[str, str]] = {}
        self._ids_re: Optional["re.Pattern[str]"] = None
        # secrets found anywhere (by context or shape): replaced wherever else they occur
        self._secrets: Set[str] = set()
        self._secrets_re: Optional["re.Pattern[str]"] = None
        self._global_re: Optional["re.Pattern[str]"] = None
        self._home_re: Optional["re.Pattern[str]"] = None
        prot = [p for p in protected if isinstance(p, str) and p.strip()]
        self._protected_full = {p.lower() for p in prot}
        self._protected_words: Set[str] = set()
        for p in prot:
            self._protected_words.update(w.lower() for w in re.split(r"[^\w.+-]+", p) if w)
            self._protected_words.update(w.lower() for w in re.split(r"[^A-Za-z0-9]+", p) if w)
        self._protected_blob = "\n".join(sorted(self._protected_full))

    # -- learning ----------------------------------------------------------------------------
    def add_host(self, value: str, authoritative: bool = False) -> None:
        v = value.strip().strip("\"'")
        if is_null(v) or len(v) > 120 or "<" in v:
            return
        key = self._host_key(v)
        self._add_name(v, "host", key, authoritative)
        short = v.split(".")[0]
        if short != v and not re.fullmatch(r"[\d.]+", v):
            self._add_name(short, "host", key, authoritative)

    def add_user(self, value: str, authoritative: bool = False) -> None:
        v = value.strip().strip("\"'")
        if is_null(v) or v.lower() in NOT_USERS or len(v) > 64 or "<" in v or self.is_system(v):
            return
        self._add_name(v, "user", v.lower(), authoritative)
        words = v.split()
        if len(words) > 1:  # "Jane Doe": each distinctive part is a name too
            for w in words:
                if len(w) >= 4 and w.lower() not in GENERIC_NAMES and re.fullmatch(r"[\w.-]+", w):
                    self._add_name(w, "user", w.lower(), False)
        m = re.search(r"\(([A-Za-z_][\w.-]*)\)\s*$", v)  # "Alice Smith (alice)"
        if m:
            self._add_name(m.group(1), "user", m.group(1).lower(), authoritative)

    def is_system(self, name: str) -> bool:
        """A system account or group (patterns.py; or one `id` showed with a system number): kept."""
        return is_system_account(name) or name.strip().lower() in self._system

    def learn_system_ids(self, text: str) -> None:
        for name in system_names(text):  # a name learned as a user before is then kept as it is
            self._system.add(name)
            if self._names.get(name, ("", ""))[0] == "user":
                del self._names[name]
                self._authoritative.discard(name)
                self._global_re = None

    def add_home(self, path: str) -> None:
        p = path.strip().rstrip("/\\")
        if len(p) < 2 or p in ("/", "C:", "c:") or p in SYSTEM_HOMES:
            return
        norm = p.replace("\\\\", "\\").lower()
        self._homes.setdefault(norm, norm.replace("\\", "/"))
        self._home_re = None

    def _add_name(self, v: str, kind: str, key: str, authoritative: bool) -> None:
        low = v.lower()
        if low not in self._names:
            self._names[low] = (kind, key)
            self._global_re = None
        if authoritative:
            self._authoritative.add(low)
            self._global_re = None

    @staticmethod
    def _host_key(v: str) -> str:
        low = v.lower()
        return low if re.fullmatch(r"[\d.]+", low) else low.split(".")[0]

    def seed_live(self, env: Optional[Mapping[str, str]] = None) -> None:
        """This machine's own host name, user name and home directory (report/seeds.py)."""
        from .seeds import live_seeds

        hosts, users, homes = live_seeds(os.environ if env is None else env)
        for h in hosts:
            self.add_host(h, authoritative=True)
        for u in users:
            self.add_user(u, authoritative=True)
        for home in homes:
            self.add_home(home)

    def learn(self, text: str, mode: str = "text") -> None:
        """Collect host and user names from one capture (or any text)."""
        if not self.enabled or not text:
            return
        self.learn_system_ids(text)
        if mode == "json":
            for key, value, _parent in json_strings(text):
                hint = key_hint(key, _parent)
                if hint == "host":
                    self.add_host(value)
                elif hint == "user":
                    self.add_user(value)
                elif hint in ("serial", "uuid", "machine-id") and not is_null(value):
                    self.add_id(value, *classify_id(hint, value))
                elif hint == "secret" and not is_null(value):
                    self.add_secret(value)
                elif (_parent == "env" and key and key not in SETTINGS_VARS
                      and not key.startswith(OVERRIDE_PREFIX) and looks_secret(value)):
                    self.add_secret(value)
                self._learn_plain(value)
        self._learn_plain(text)

    def _learn_plain(self, text: str) -> None:
        for rx in PROMPTS + [BUILDER]:
            for m in rx.finditer(text):
                self.add_user(m.group("user"))
                self.add_host(m.group("host"))
        for m in UNAME.finditer(text):
            self.add_host(m.group("host"))
        for m in HOST_KV.finditer(text):
            self.add_host(m.group("host"))
        for m in USER_KV.finditer(text):
            self.add_user(m.group("user"))
        for _s, _e, host in known_hosts(text):
            self.add_host(host)
        for m in POSIX_HOME.finditer(text):
            self.add_user(m.group("user1") or m.group("user2") or "")
        for m in WIN_HOME.finditer(text):
            self.add_user(m.group("user1") or m.group("user2") or "")
        for _s, _e, hint, value in csv_cells(text):
            if hint == "host":
                self.add_host(value)
            elif hint == "user":
                self.add_user(value)
        for rule in (self._r_ids_in_context, self._r_gpu_uuid):
            for s, e, kind, key in rule(text):
                if kind not in ("host", "user", "secret", "path"):
                    self.add_id(text[s:e], kind, key)
        for rule in (self._r_secrets, self._r_detect_secrets):
            for s, e, kind, _key in rule(text):
                self.add_secret(text[s:e])

    def add_secret(self, value: str) -> None:
        """A value known to be a secret: replaced wherever it occurs, even without its context."""
        v = value.strip()
        if len(v) >= 6 and not is_null(v) and "<" not in v and v not in self._secrets:
            self._secrets.add(v)
            self._secrets_re = None

    def add_id(self, value: str, kind: str, key: str) -> None:
        v = value.strip()
        if len(v) >= 6 and not is_null(v) and "<" not in v and v.lower() not in self._ids:
            self._ids[v.lower()] = (kind, key)
            self._ids_re = None

    # -- placeholders ------------------------------------------------------------------------
    def placeholder(self, kind: str, key: str, original: str = "") -> str:
        k = (kind, key)
        if k not in self._map:
            self._next[kind] += 1
            self._map[k] = f"<{kind}-{self._next[kind]}>"
        self._occurrences[kind] += 1
        return shaped(self._map[k], kind, original)

    def summary(self) -> Redactions:
        """What was replaced, by kind, counted after every replacement (the report's `redactions`)."""
        if not self.enabled:
            return Redactions(enabled=False, note="NOT REDACTED (--no-redact): this report may hold host and user "
                              "names, paths, addresses, serial numbers and secrets; do not post it publicly")
        values: Dict[str, int] = {}
        for kind, _key in self._map:
            values[kind] = values.get(kind, 0) + 1
        seen = set(values) | set(self._occurrences)
        ordered = {k: RedactionCount(values=values.get(k, 0), occurrences=self._occurrences.get(k, 0))
                   for k in KINDS if k in seen}
        return Redactions(
            enabled=True, kinds=ordered, total=sum(v.occurrences for v in ordered.values()),
            note="the same value has the same placeholder throughout this report; "
            "kinds: " + "; ".join(f"{k}: {d}" for k, d in KINDS.items()))

    # -- protection --------------------------------------------------------------------------
    def _protected_name(self, low: str) -> bool:
        return low in self._protected_words or low in self._protected_full

    def _in_fact(self, value: str) -> bool:
        return bool(self._protected_blob) and value.lower() in self._protected_blob

    # -- redaction ---------------------------------------------------------------------------
    def redact_text(self, text: str, mode: str = "text") -> str:
        if not self.enabled or not text:
            return text
        if mode == "json":
            return self._redact_json_text(text)
        return self._apply(text, self._spans(text), xml=(mode == "xml"))

    def redact_capture(self, name: str, data: bytes) -> str:
        text, _exact = text_of(data, name)
        return self.redact_text(text, mode_for(name))

    def redact_obj(self, obj: Any, key: Optional[str] = None, parent: Optional[str] = None) -> Any:
        """A JSON-like object (the scan report, the plan, verify results), redacted."""
        if not self.enabled:
            return obj
        if isinstance(obj, dict):
            return {k: self.redact_obj(v, str(k), key) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.redact_obj(v, key, parent) for v in obj]
        if isinstance(obj, tuple):
            return [self.redact_obj(v, key, parent) for v in obj]
        if isinstance(obj, str):
            return self._redact_value(obj, key, parent)
        return obj

    def _redact_value(self, value: str, key: Optional[str], parent: Optional[str]) -> str:
        hint = key_hint(key, parent)
        stripped = value.strip()
        if hint and not is_null(stripped) and "<" not in stripped:
            if hint == "secret":
                return self.placeholder("secret", stripped)
            if hint in ("serial", "uuid", "machine-id"):
                kind, k = classify_id(hint, stripped)
                return self.placeholder(kind, k, stripped)
            if hint == "host" and not re.fullmatch(r"\d+", stripped):
                self.add_host(stripped)
                return self.placeholder("host", self._host_key(stripped))
            if (hint == "user" and stripped.lower() not in NOT_USERS and not re.fullmatch(r"\d+", stripped)
                    and not self.is_system(stripped)):
                self.add_user(stripped)
                return self.placeholder("user", stripped.lower())
        if is_version_key(key, parent) and _BARE_VERSION.fullmatch(stripped):
            return value  # "version": "2.13.0.1", "jaxlib": "0.12.0.1": a version, not an address
        if (
            parent == "env"
            and key
            and key not in SETTINGS_VARS
            and not key.startswith(OVERRIDE_PREFIX)
            and looks_secret(value)
        ):
            return self.placeholder("secret", stripped)
        return self._apply(value, self._spans(value), xml=False)

    def _redact_json_text(self, text: str) -> str:
        out: List[str] = []
        pos = 0
        for kind, start, end, key, parent in json_walk(text):
            gap = text[pos:start]
            out.append(self._apply(gap, self._spans(gap), xml=False) if gap.strip() else gap)
            lit = text[start:end]
            if kind in ("str", "key"):
                value = json_string(lit)
                if value is None:  # not a valid JSON string: redact its raw text
                    lit = self._apply(lit, self._spans(lit), xml=False)
                else:
                    new = (
                        self._redact_value(value, key, parent)
                        if kind == "str"
                        else self._apply(value, self._spans(value), xml=False)
                    )
                    lit = lit if new == value else json.dumps(new, ensure_ascii=False)
            elif kind == "num" and key_hint(key) in ("serial", "uuid", "machine-id") and not is_null(lit):
                k, v = classify_id(key_hint(key) or "serial", lit)
                lit = json.dumps(self.placeholder(k, v, lit))
            elif kind == "num" and str(key).lower() in _CLOUD_ID_KEYS and re.fullmatch(r"\d{16,20}", lit):
                # a cloud instance's numeric id (GCP metadata: "id": 4567891234567891234)
                lit = json.dumps(self.placeholder("machine-id", lit, lit))
            out.append(lit)
            pos = end
        tail = text[pos:]
        out.append(self._apply(tail, self._spans(tail), xml=False) if tail.strip() else tail)
        return "".join(out)

    def _apply(self, text: str, spans: List[Span], xml: bool) -> str:
        if not spans:
            return text
        out: List[str] = []
        pos = 0
        for start, end, kind, key in sorted(spans):
            out.append(text[pos:start])
            ph = self.placeholder(kind, key, text[start:end])
            out.append(ph.replace("<", "&lt;").replace(">", "&gt;") if xml else ph)
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def _spans(self, text: str) -> List[Span]:
        """Every sensitive span, resolved so that earlier rules win overlaps."""
        accepted: List[Span] = []
        starts: List[int] = []
        for rule in self._rules():
            for span in rule(text):
                s, e = span[0], span[1]
                if e <= s:
                    continue
                i = bisect.bisect_left(starts, s)
                if i > 0 and accepted[i - 1][1] > s:
                    continue
                if i < len(accepted) and accepted[i][0] < e:
                    continue
                starts.insert(i, s)
                accepted.insert(i, span)
        return accepted

    def _rules(self) -> List[Callable[[str], Iterator[Span]]]:
        return [
            self._r_private_keys,
            self._r_known_secrets,
            self._r_secrets,
            self._r_detect_secrets,
            self._r_names_in_context,
            self._r_ids_in_context,
            self._r_disk_and_cloud_ids,
            self._r_known_ids,
            self._r_gpu_uuid,
            self._r_uuid,
            self._r_product_id,
            self._r_mac,
            self._r_ipv6,
            self._r_ipv4,
            self._r_hex32,
            self._r_email_sid,
            self._r_homes,
            self._r_user_paths,
            self._r_global_names,
        ]

    # Each rule yields (start, end, kind, key).
    def _r_private_keys(self, text: str) -> Iterator[Span]:
        if "PRIVATE KEY" not in text:
            return
        for m in PRIVATE_KEY_BLOCK.finditer(text):
            body = m.group("body")
            lead = len(body) - len(body.lstrip())
            core = body.strip()
            if core:
                yield m.start("body") + lead, m.start("body") + lead + len(core), "secret", core

    def _r_known_secrets(self, text: str) -> Iterator[Span]:
        if not self._secrets:
            return
        if self._secrets_re is None:
            alts = "|".join(re.escape(v) for v in sorted(self._secrets, key=len, reverse=True))
            self._secrets_re = re.compile(rf"(?:{alts})")
        for m in self._secrets_re.finditer(text):
            yield m.start(), m.end(), "secret", m.group(0)

    def _r_detect_secrets(self, text: str) -> Iterator[Span]:
        """Values that detect-secrets' token detectors recognise by shape (Stripe, Twilio, SendGrid,
        Telegram, Azure storage keys, ...), wherever they are in the text."""
        for value in detect_secret_values(text):
            if self._in_fact(value):
                continue
            start = text.find(value)
            while start >= 0:
                yield start, start + len(value), "secret", value
                start = text.find(value, start + len(value))

    def _r_secrets(self, text: str) -> Iterator[Span]:
        assignments = SECRET_ASSIGN.finditer(text) if any(w in text for w in SECRET_HINTS) else ()
        for m in assignments:
            if is_secret_name(m.group("name")) and not is_null(m.group("v")):
                yield m.start("v"), m.end("v"), "secret", m.group("v")
        low = text.lower()
        if any(w in low for w in _ANY_CASE_HINTS):
            for m in SECRET_ASSIGN_ANY.finditer(text):
                g = "qv" if m.group("qv") is not None else "v"
                v = m.group(g)
                if v and not is_null(v) and len(v.strip()) >= 3 and not _harmless(v):
                    yield m.start(g), m.end(g), "secret", v
            for m in NETRC.finditer(text):
                yield m.start("v"), m.end("v"), "secret", m.group("v")
        if "auth" in low or "x-api" in low:
            for m in AUTH_HEADER.finditer(text):
                g = "v" if m.group("v") is not None else "v2"
                yield m.start(g), m.end(g), "secret", m.group(g)
        if any(p in text for p in TOKEN_PREFIXES):
            for m in TOKEN_SHAPES.finditer(text):
                yield m.start(), m.end(), "secret", m.group(0)
        if "://" in text:
            for m in URL_CRED.finditer(text):
                cred = m.group("cred")
                if ":" not in cred and (cred.lower() in URL_USERS_NOT_SECRET or is_null(cred) or "<" in cred):
                    continue
                yield m.start("cred"), m.end("cred"), "secret", cred
        if "accountkey" in low or "sharedaccess" in low or "sig=" in low:
            for m in CONN_SECRET.finditer(text):
                yield m.start("v"), m.end("v"), "secret", m.group("v")
        if any(h in low for h in CLI_HINTS):
            for rx in CLI_SECRETS:
                for m in rx.finditer(text):
                    g = "qv" if m.groupdict().get("qv") is not None else "v"
                    v = m.group(g)
                    if v and not is_null(v) and not _harmless(v):
                        yield m.start(g), m.end(g), "secret", v

    def _r_names_in_context(self, text: str) -> Iterator[Span]:
        for rx in PROMPTS + [BUILDER]:
            for m in rx.finditer(text):
                if not is_null(m.group("user")) and m.group("user").lower() not in NOT_USERS:
                    yield m.start("user"), m.end("user"), "user", m.group("user").lower()
                if not is_null(m.group("host")):
                    yield m.start("host"), m.end("host"), "host", self._host_key(m.group("host"))
        for m in UNAME.finditer(text):
            if not is_null(m.group("host")):
                yield m.start("host"), m.end("host"), "host", self._host_key(m.group("host"))
        for m in HOST_KV.finditer(text):
            v = m.group("host")
            if not is_null(v) and "<" not in v:
                yield m.start("host"), m.end("host"), "host", self._host_key(v)
        for m in USER_KV.finditer(text):
            v = m.group("user")
            if not is_null(v) and v.lower() not in NOT_USERS and "<" not in v:
                yield m.start("user"), m.end("user"), "user", v.lower()
        for s, e, host in known_hosts(text):
            yield s, e, "host", self._host_key(host)

    def _r_ids_in_context(self, text: str) -> Iterator[Span]:
        low = text.lower()
        if not any(k in low for k in ID_HINTS):
            for m in MAC_TMP.finditer(text):
                yield m.start("v"), m.end("v"), "path", m.group("v")
            return
        for m in ID_KV.finditer(text):
            v = m.group("v")
            if is_null(v) or "<" in v or "&lt;" in v:
                continue
            key = m.group("key").lower()
            hint = (
                "machine-id"
                if re.search(r"machine|hardware|platform|provisioning|kern\.|instance|vm|wwn", key)
                else "serial"
            )
            s, e = m.start("v"), m.end("v")
            if v.startswith("{") and v.endswith("}"):
                s, e, v = s + 1, e - 1, v[1:-1]
            kind, k = classify_id(hint, v)
            yield s, e, kind, k
        for m in XML_ID.finditer(text):
            v = m.group("v").strip()
            if not is_null(v) and "&lt;" not in v:
                kind, k = classify_id("serial", v)
                yield m.start("v"), m.end("v"), kind, k
        for s, e, hint, value in csv_cells(text):
            if hint == "host":
                yield s, e, "host", self._host_key(value)
            elif hint == "user":
                yield s, e, "user", value.lower()
            elif hint == "secret":
                yield s, e, "secret", value
            else:
                kind, k = classify_id(hint, value)
                yield s, e, kind, k
        for m in KFD_UNIQUE.finditer(text):
            if int(m.group("v")) >= 1 << 16:  # real ids are 64-bit; small ones are our pseudonyms
                yield m.start("v"), m.end("v"), "gpu-uuid", "amd:%x" % int(m.group("v"))
        for rx in (LSPCI_DSN, LSUSB_SERIAL):
            for m in rx.finditer(text):
                if not is_null(m.group("v")):
                    yield m.start("v"), m.end("v"), "serial", m.group("v").lower()
        for m in MAC_TMP.finditer(text):
            yield m.start("v"), m.end("v"), "path", m.group("v")

    def _r_disk_and_cloud_ids(self, text: str) -> Iterator[Span]:
        for s, e, kind, value in disk_and_cloud_ids(text):
            yield s, e, kind, self._host_key(value) if kind == "host" else value

    def _r_known_ids(self, text: str) -> Iterator[Span]:
        if not self._ids:
            return
        if self._ids_re is None:
            alts = "|".join(re.escape(v) for v in sorted(self._ids, key=len, reverse=True))
            self._ids_re = re.compile(rf"(?i)(?<![A-Za-z0-9])(?:{alts})(?![A-Za-z0-9])")
        for m in self._ids_re.finditer(text):
            kind, key = self._ids[m.group(0).lower()]
            yield m.start(), m.end(), kind, key

    def _r_gpu_uuid(self, text: str) -> Iterator[Span]:
        if "i-" in text:
            for m in AWS_INSTANCE.finditer(text):
                if not self._in_fact(m.group(0)):
                    yield m.start(), m.end(), "machine-id", m.group(0)
        for m in CONTAINER_ID.finditer(text):
            yield m.start(), m.end(), "machine-id", m.group(0)
        if "GPU-" not in text and "MIG-" not in text:
            return
        for m in GPU_UUID.finditer(text):
            if not is_null(m.group("hex")):
                yield m.start(), m.end(), "gpu-uuid", m.group("hex").lower().replace("-", "")
        for m in AMD_UUID.finditer(text):
            if not is_null(m.group("hex")):
                yield m.start(), m.end(), "gpu-uuid", "amd:%x" % int(m.group("hex"), 16)

    def _r_uuid(self, text: str) -> Iterator[Span]:
        for m in UUID.finditer(text):
            if not self._in_fact(m.group(0)) and not is_null(m.group("hex")):
                yield m.start(), m.end(), "uuid", m.group("hex").lower()

    def _r_product_id(self, text: str) -> Iterator[Span]:
        for m in PRODUCT_ID.finditer(text):
            if not self._in_fact(m.group(0)):
                yield m.start(), m.end(), "product-id", m.group(0).upper()

    def _r_mac(self, text: str) -> Iterator[Span]:
        for m in MAC.finditer(text):
            v = m.group(0)
            norm = re.sub(r"[:-]", "", v).lower()
            if norm in ("000000000000", "ffffffffffff") or self._in_fact(v):
                continue
            yield m.start(), m.end(), "mac", norm

    def _r_ipv6(self, text: str) -> Iterator[Span]:
        for m in IPV6.finditer(text):
            v = m.group(0)
            if "::" not in v and v.count(":") != 7:
                continue
            try:
                addr = ipaddress.IPv6Address(v.split("%")[0])
            except ValueError:
                continue
            if addr.is_loopback or addr.is_unspecified or self._in_fact(v):
                continue
            yield m.start(), m.end(), "ip", str(addr)

    def _r_ipv4(self, text: str) -> Iterator[Span]:
        for m in IPV4.finditer(text):
            v = m.group(0)
            try:
                addr = ipaddress.IPv4Address(v)
            except ValueError:
                continue
            if addr.is_loopback or addr.is_unspecified or v == "255.255.255.255" or addr in _THIS_NETWORK:
                continue  # 0.12.0.1 is a version (jax): no host has an address in 0.0.0.0/8
            if self._in_fact(v) or looks_like_version(text, m.start(), m.end()):
                continue
            yield m.start(), m.end(), "ip", v

    def _r_hex32(self, text: str) -> Iterator[Span]:
        for m in HEX32.finditer(text):
            v = m.group(0)
            if not self._in_fact(v) and len(set(v)) > 2:
                yield m.start(), m.end(), "machine-id", v.lower()

    def _r_email_sid(self, text: str) -> Iterator[Span]:
        if "@" in text:
            for m in EMAIL.finditer(text):
                if not self._in_fact(m.group(0)):
                    yield m.start(), m.end(), "email", m.group(0).lower()
        if "S-1-5-21" in text:
            for m in WIN_SID.finditer(text):
                yield m.start(), m.end(), "machine-id", m.group(0)

    def _r_homes(self, text: str) -> Iterator[Span]:
        if not self._homes:
            return
        if self._home_re is None:
            alts = []
            for norm in sorted(self._homes, key=len, reverse=True):
                parts = [re.escape(p) for p in re.split(r"[\\/]", norm)]
                alts.append(r"(?:\\\\|\\|/)".join(parts))
            self._home_re = re.compile(r"(?i)(?<![\w.~-])(?:" + "|".join(alts) + r")(?![\w.-])")
        for m in self._home_re.finditer(text):
            norm = re.sub(r"\\\\|\\", "/", m.group(0)).lower()
            yield m.start(), m.end(), "home", norm

    def _r_user_paths(self, text: str) -> Iterator[Span]:
        for rx in (POSIX_HOME, WIN_HOME):
            for m in rx.finditer(text):
                g = "user1" if m.group("user1") else "user2"
                u = m.group(g) or ""
                if u and u.lower() not in NOT_USERS and not is_null(u):
                    yield m.start(g), m.end(g), "user", u.lower()

    def _r_global_names(self, text: str) -> Iterator[Span]:
        if self._global_re is None:
            names = [
                n
                for n in self._names
                if len(n) >= 2
                and not n.isdigit()  # a numeric uid is replaced in context only, never as a number
                and (n in self._authoritative or n not in GENERIC_NAMES)
                and not self._protected_name(n)
            ]
            if not names:
                self._global_re = re.compile(r"(?!x)x")
            else:
                alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
                self._global_re = re.compile(rf"(?i)(?<![A-Za-z0-9_])(?:{alts})(?![A-Za-z0-9_])")
        for m in self._global_re.finditer(text):
            kind, key = self._names[m.group(0).lower()]
            yield m.start(), m.end(), kind, key
