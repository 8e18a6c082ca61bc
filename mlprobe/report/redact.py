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
import math
import os
import re
from collections import Counter
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from ..host import ENV_VARS as _SETTINGS
from ..host import OVERRIDE_PREFIX as _OVERRIDE

# kind -> what it stands for (listed in the report's `redactions`).
KINDS: Dict[str, str] = {
    "secret": "environment or configuration values that look like tokens, keys or passwords",
    "host": "host and computer names",
    "user": "user names",
    "home": "home directories",
    "path": "other per-user paths",
    "ip": "IPv4 and IPv6 addresses",
    "mac": "MAC addresses",
    "gpu-uuid": "GPU and MIG UUIDs and other per-GPU unique ids (NVIDIA GPU-..., PDI, AMD unique ids)",
    "uuid": "other UUIDs and GUIDs",
    "serial": "serial numbers and board ids",
    "machine-id": "machine ids",
    "product-id": "Windows product ids and keys",
}

# Values that carry no information and are never replaced.
NULL_VALUES = {
    "",
    "n/a",
    "na",
    "none",
    "null",
    "0",
    "0x0",
    "00000000",
    "unknown",
    "not specified",
    "not available",
    "not supported",
    "default string",
    "to be filled by o.e.m.",
    "system serial number",
    "[n/a]",
    "redacted",
    "xx",
    "-",
    "not applicable",
    "(none)",
    "gpu-xx",
    "cpu-xx",
    "0000000000000000",
}
# Names that are replaced only where their context says they are a name, never as a bare word
# (as a bare word they are too often something else).
GENERIC_NAMES = {
    "localhost",
    "localhost.localdomain",
    "user",
    "users",
    "admin",
    "administrator",
    "root",
    "ubuntu",
    "debian",
    "fedora",
    "pi",
    "raspberrypi",
    "nvidia",
    "jetson",
    "test",
    "guest",
    "default",
    "host",
    "home",
    "me",
    "you",
    "name",
    "username",
    "hostname",
}
# Folder names under /home, /Users, C:\Users that are not a person.
NOT_USERS = {
    "shared",
    "public",
    "default",
    "default user",
    "all users",
    "defaultapppool",
    "desktop.ini",
    "$user",
    "%username%",
    "<user>",
    "...",
    "*",
    "~",
}

_SECRET_WORDS = {
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "credential",
    "credentials",
    "auth",
    "pat",
    "privatekey",
    "accesskey",
}
_HOST_KEYS = {
    "hostname",
    "host_name",
    "nodename",
    "node_name",
    "computername",
    "computer_name",
    "machinename",
    "machine_name",
    "systemname",
    "system_name",
    "servername",
    "pscomputername",
    "csname",
}
_USER_KEYS = {"username", "user_name", "user", "logname", "login", "owner"}

# host.json env entries that are settings (read by probes and rules), never secrets.

_ANSI = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"
_VENV = r"(?:\([^)\n]{1,60}\)[ \t]*)?"
_U = r"[A-Za-z_][\w.-]{0,31}"
_H = r"[A-Za-z0-9][\w.-]{0,62}"

_PROMPTS = [
    # user@host:~/dir$   (base) user@host:/x#
    re.compile(
        rf"(?m)^[ \t]*{_ANSI}{_VENV}{_ANSI}(?P<user>{_U})@(?P<host>{_H}){_ANSI}:"
        rf"{_ANSI}[^\s$#]*{_ANSI}[ \t]?[$#]"
    ),
    # [user@host dir]$
    re.compile(rf"(?m)^[ \t]*{_ANSI}{_VENV}\[(?P<user>{_U})@(?P<host>{_H})[ \t][^\]\n]*\][ \t]?[$#]"),
    # user@host dir %   (zsh on macOS)
    re.compile(rf"(?m)^[ \t]*{_ANSI}{_VENV}(?P<user>{_U})@(?P<host>{_H})[ \t]+\S+[ \t]+[%$#](?:[ \t]|$)"),
]
# (user@host) as kernels and NVIDIA modules record their builder.
_BUILDER = re.compile(rf"\((?P<user>{_U})@(?P<host>{_H})\)")
_UNAME = re.compile(
    r"(?m)^[ \t]*(?:Linux|Darwin|FreeBSD|OpenBSD|NetBSD|SunOS|(?:MINGW|MSYS|CYGWIN)[\w.-]*)"
    r"[ \t]+(?!version\b)(?!\d+\.\d)(?P<host>[^\s]+)[ \t]+\d"
)
_HOST_KV = re.compile(
    r"(?im)^[ \t]*(?:kern\.hostname|host[ _-]?name|machine[ _-]?name|computer[ _-]?name|"
    r"node[ _-]?name|system[ _-]?name|cs[ _-]?name|pscomputername|server[ _-]?name)"
    r"[ \t]*[:=][ \t]*\"?(?P<host>[^\"\r\n]*?)\"?[ \t\r]*$"
)
_USER_KV = re.compile(
    r"(?im)^[ \t]*(?:user[ _-]?name|user|logname|login)[ \t]*[:=][ \t]*\"?"
    r"(?P<user>[^\"\r\n]*?)\"?[ \t\r]*$"
)
_POSIX_HOME = re.compile(
    r"/(?:private/)?(?:home|Users|var/home|export/home|usr/home|mnt/[a-zA-Z]/Users|[a-zA-Z]/Users|"
    r"run/media)/(?:(?P<user1>[^/\s\"'\\:;,()<>\[\]|*?=][^/\n\"'\\:;,()<>\[\]|*?=]{0,38}?[^/\s\"'\\:;,()<>\[\]|*?=])(?=/|\"|'|\Z)|(?P<user2>[^/\s\"'\\:;,()<>\[\]|*?=]+))"
)
_WIN_HOME = re.compile(
    r"(?i)\\{1,2}(?:Users|Documents and Settings|home)\\{1,2}"
    r"(?:(?P<user1>[^\\/\s\"'<>|:*?][^\\/\n\"'<>|:*?]{0,38}?[^\\/\s\"'<>|:*?])(?=\\|\"|'|\Z)|(?P<user2>[^\\/\s\"'<>|:*?,;()\[\]]+))"
)
_MAC_TMP = re.compile(r"/(?:private/)?var/folders/(?P<v>[\w+-]{1,4}/[\w+-]{6,})")

_SECRET_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_])(?P<name>[A-Z][A-Z0-9_]*)[ \t]*[=:][ \t]*(?P<q>[\"']?)"
    r"(?P<v>[^\s\"',;]+)"
)
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_])(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|"
    r"sk-[A-Za-z0-9_-]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|"
    r"glpat-[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
# Cheap substring tests before the costly assignment regex (names are upper case there).
_SECRET_HINTS = ("TOKEN", "SECRET", "PASS", "KEY", "AUTH", "CREDENTIAL", "PAT")
_TOKEN_PREFIXES = (
    "hf_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "sk-",
    "xox",
    "AKIA",
    "AIza",
    "glpat-",
    "eyJ",
)
_URL_CRED = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://(?P<cred>[^/\s:@]+:[^/\s@]+)@")

_HEX_UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_GPU_UUID = re.compile(rf"(?<![\w-])(?:(?:MIG|GPU)-){{1,2}}(?P<hex>{_HEX_UUID})(?![0-9A-Fa-f])")
_AMD_UUID = re.compile(r"(?<![\w-])GPU-(?P<hex>[0-9A-Fa-f]{16})(?![\w-])")
_UUID = re.compile(rf"(?<![\w-])(?P<hex>{_HEX_UUID})(?![\w-])")
_PRODUCT_ID = re.compile(r"(?<![\w-])(?=[0-9A-Z-]*\d)[0-9A-Z]{5}(?:-[0-9A-Z]{5}){3,4}(?![\w-])")
_MAC = re.compile(r"(?<![\w:.-])(?:[0-9A-Fa-f]{2}([:-]))(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}(?![\w:.-])")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?:%[\w.]+)?(?![\w:])")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_HEX32 = re.compile(r"(?<![\w-])[0-9a-fA-F]{32}(?![\w-])")
_VERSION_BEFORE = re.compile(r"(?i)(?:version|ver\.?|v)[ \t]*[:=]?[ \t]*$")

# "Serial Number : X", "Board ID : 0x2d00", "GPU PDI : 0x...", "Unique ID: 0x...", ...
_ID_KV = re.compile(
    r"(?im)(?<![\w.])(?P<key>(?:serial(?:[ \t_]*(?:number|no\.?|#))?|serialnumber|"
    r"board[ \t_]*id|gpu[ \t_]*pdi|unique[ \t_]*id|host[ \t_]*id|fabric[ \t_]*guid|hardware[ \t_]*uuid|"
    r"provisioning[ \t_]*udid|platform[ \t_]*uuid|machine[ \t_]*id|kern\.uuid|kern\.bootsessionuuid))"
    r"(?:[ \t]*\([^)\n]*\))?[ \t]*[:=][ \t]*(?P<v>[^\r\n]*?)[ \t\r]*$"
)
_ID_HINTS = ("serial", "board", "pdi", "unique", "host", "fabric", "uuid", "udid", "guid", "machine")
_XML_ID = re.compile(
    r"<(?P<tag>[\w]*serial[\w]*|board_id|host_id|gpu_fabric_guid|gpu_pdi|pdi)>"
    r"(?P<v>[^<]*)</(?P=tag)>"
)
_KFD_UNIQUE = re.compile(r"(?m)^[ \t]*unique_id[ \t]+(?P<v>\d+)[ \t\r]*$")
_LSPCI_DSN = re.compile(r"Device Serial Number[ \t]+(?P<v>[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){7})")
_LSUSB_SERIAL = re.compile(r"(?m)^[ \t]*iSerial[ \t]+\d+[ \t]+(?P<v>\S[^\r\n]*?)[ \t\r]*$")

_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|[{}\[\]:,]')

Span = Tuple[int, int, str, str]  # start, end, kind, key


def _camel_words(name: str) -> List[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def is_secret_name(name: str) -> bool:
    """HF_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY, password, apiKey, ... (not KEYBOARD)."""
    words = _camel_words(name)
    if any(w in _SECRET_WORDS for w in words):
        return True
    joined = "".join(words)
    if any(s in joined for s in ("apikey", "secretkey", "accesskey", "privatekey", "password")):
        return True
    return "key" in words and (name.isupper() or len(words) == 1)


def looks_secret(value: str) -> bool:
    """A long, high-entropy token without spaces or path separators."""
    v = value.strip()
    if len(v) < 16 or re.search(r"[\s/\\]", v):
        return False
    parts = re.split(r"[_.-]", v)
    if len(parts) >= 3 and all(len(p) <= 12 for p in parts):
        return False  # an identifier made of words (metal_amd_radeon_pro_5600m.0), not a token
    classes = sum(bool(re.search(p, v)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    if classes < 2:
        return False
    counts = Counter(v)
    entropy = -sum(c / len(v) * math.log2(c / len(v)) for c in counts.values())
    return entropy >= 3.5


def _null(value: str) -> bool:
    """No information: empty, N/A, all zeros, or already a placeholder of ours."""
    v = value.strip().strip("{}[]").strip().lower()
    if v in NULL_VALUES or v.startswith("redacted") or (v.startswith("<") and v.endswith(">")):
        return True
    core = re.sub(r"^(?:(?:gpu|mig)-)+|^0x|[-:]", "", v)
    return core == "" or set(core) <= {"0"} or bool(re.fullmatch(r"0{10,}[0-9a-f]{1,6}", core))


_CSV_HINTS = (
    "serial",
    "uuid",
    "guid",
    "udid",
    "unique",
    "board",
    "pdi",
    "host",
    "user",
    "login",
    "owner",
    "node",
    "computer",
    "machine",
    "system",
    "server",
    "token",
    "secret",
    "pass",
    "key",
    "auth",
    "credential",
)
_CSV_FIELD = re.compile(r"[A-Za-z_][\w.]*(?: \[[^\]]*\])?")


def _csv_cells(text: str) -> Iterator[Tuple[int, int, str, str]]:
    """Cells of comma-separated tables (nvidia-smi --query-gpu ... --format=csv) whose column
    names say they hold an identity (serial, uuid, hostname, ...): (start, end, hint, value)."""
    hints: Optional[List[Optional[str]]] = None
    pos = 0
    low = text.lower()
    if "," not in text or not any(k in low for k in _CSV_HINTS):
        return
    for line in text.splitlines(keepends=True):
        start, body = pos, line.rstrip("\r\n")
        pos += len(line)
        fields = body.split(",")
        if len(fields) >= 2 and all(_CSV_FIELD.fullmatch(f.strip()) for f in fields):
            names = [f.strip().split(" [")[0] for f in fields]
            cols = [_key_hint(n.split(".")[-1]) or _key_hint(n.replace(".", "_")) for n in names]
            hints = cols if any(cols) else None
            continue
        if hints is None:
            continue
        if len(fields) != len(hints):
            hints = None if not body.strip() else hints
            continue
        off = start
        for hint, cell in zip(hints, fields):
            value = cell.strip()
            if hint and value and not _null(value):
                lead = len(cell) - len(cell.lstrip())
                yield off + lead, off + lead + len(value), hint, value
            off += len(cell) + 1


def protected_values(scan_report: Mapping[str, Any]) -> List[str]:
    """The strings of a scan report that a replay must reproduce exactly (facts, not identities):
    everything except ids, serials, interpreter and package paths, probe errors and the source."""
    skip = {"uuid", "serial", "executable", "location", "source", "probes", "env", "error"}
    out: List[str] = []

    def walk(obj: Any, key: Optional[str]) -> None:
        if key in skip:
            return
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, str(k))
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v, key)
        elif isinstance(obj, str):
            if "/" in obj or "\\" in obj:  # paths name users; they are redacted by context
                return
            out.append(obj)

    for k, v in scan_report.items():
        if k not in ("source", "probes"):
            walk(v, k)
    return out


def text_of(data: bytes) -> Tuple[str, bool]:
    """Bytes -> text, keeping line ends. The flag says whether the bytes were exact UTF-8."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace"), False
    try:
        text = data.decode("utf-8")
        return text, True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def mode_for(name: str) -> str:
    low = name.lower()
    if low.endswith(".json"):
        return "json"
    if low.endswith(".xml"):
        return "xml"
    return "text"


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
        self._homes: Dict[str, str] = {}  # lowercase normalised -> key
        # ids seen in a context (a serial after "Serial Number:", a GPU UUID, ...): replaced
        # wherever else they occur, even without the context
        self._ids: Dict[str, Tuple[str, str]] = {}
        self._ids_re: Optional["re.Pattern[str]"] = None
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
        if _null(v) or len(v) > 120 or "<" in v:
            return
        key = self._host_key(v)
        self._add_name(v, "host", key, authoritative)
        short = v.split(".")[0]
        if short != v and not re.fullmatch(r"[\d.]+", v):
            self._add_name(short, "host", key, authoritative)

    def add_user(self, value: str, authoritative: bool = False) -> None:
        v = value.strip().strip("\"'")
        if _null(v) or v.lower() in NOT_USERS or len(v) > 64 or "<" in v:
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

    def add_home(self, path: str) -> None:
        p = path.strip().rstrip("/\\")
        if len(p) < 2 or p in ("/", "C:", "c:"):
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
        """This machine's own host name, user name and home directory."""
        import getpass
        import platform
        import socket
        from pathlib import Path

        env = os.environ if env is None else env
        for get in (socket.gethostname, platform.node):
            try:
                self.add_host(get(), authoritative=True)
            except Exception:
                pass
        try:
            self.add_user(getpass.getuser(), authoritative=True)
        except Exception:
            pass
        for var in ("USER", "USERNAME", "LOGNAME"):
            if env.get(var):
                self.add_user(env[var], authoritative=True)
        for var in ("HOSTNAME", "COMPUTERNAME"):
            if env.get(var):
                self.add_host(env[var], authoritative=True)
        try:
            self.add_home(str(Path.home()))
        except Exception:
            pass
        for var in ("HOME", "USERPROFILE"):
            if env.get(var):
                self.add_home(env[var])

    def learn(self, text: str, mode: str = "text") -> None:
        """Collect host and user names from one capture (or any text)."""
        if not self.enabled or not text:
            return
        if mode == "json":
            for key, value, _parent in _json_strings(text):
                hint = _key_hint(key)
                if hint == "host":
                    self.add_host(value)
                elif hint == "user":
                    self.add_user(value)
                elif hint in ("serial", "uuid", "machine-id") and not _null(value):
                    self.add_id(value, *_classify_id(hint, value))
                self._learn_plain(value)
        self._learn_plain(text)

    def _learn_plain(self, text: str) -> None:
        for rx in _PROMPTS + [_BUILDER]:
            for m in rx.finditer(text):
                self.add_user(m.group("user"))
                self.add_host(m.group("host"))
        for m in _UNAME.finditer(text):
            self.add_host(m.group("host"))
        for m in _HOST_KV.finditer(text):
            self.add_host(m.group("host"))
        for m in _USER_KV.finditer(text):
            self.add_user(m.group("user"))
        for m in _POSIX_HOME.finditer(text):
            self.add_user(m.group("user1") or m.group("user2") or "")
        for m in _WIN_HOME.finditer(text):
            self.add_user(m.group("user1") or m.group("user2") or "")
        for _s, _e, hint, value in _csv_cells(text):
            if hint == "host":
                self.add_host(value)
            elif hint == "user":
                self.add_user(value)
        for rule in (self._r_ids_in_context, self._r_gpu_uuid):
            for s, e, kind, key in rule(text):
                if kind not in ("host", "user", "secret", "path"):
                    self.add_id(text[s:e], kind, key)

    def add_id(self, value: str, kind: str, key: str) -> None:
        v = value.strip()
        if len(v) >= 6 and not _null(v) and "<" not in v and v.lower() not in self._ids:
            self._ids[v.lower()] = (kind, key)
            self._ids_re = None

    # -- placeholders ------------------------------------------------------------------------
    def placeholder(self, kind: str, key: str, original: str = "") -> str:
        k = (kind, key)
        if k not in self._map:
            self._next[kind] += 1
            self._map[k] = f"<{kind}-{self._next[kind]}>"
        self._occurrences[kind] += 1
        return _shaped(self._map[k], kind, original)

    def summary(self) -> Dict[str, Any]:
        if not self.enabled:
            return {
                "enabled": False,
                "note": "NOT REDACTED (--no-redact): this report may hold host and user names, "
                "paths, addresses, serial numbers and secrets; do not post it publicly",
            }
        per_kind: Dict[str, Dict[str, int]] = {}
        for kind, _key in self._map:
            per_kind.setdefault(kind, {"values": 0, "occurrences": 0})["values"] += 1
        for kind, n in self._occurrences.items():
            per_kind.setdefault(kind, {"values": 0, "occurrences": 0})["occurrences"] = n
        ordered = {k: per_kind[k] for k in KINDS if k in per_kind}
        return {
            "enabled": True,
            "kinds": ordered,
            "total": sum(v["occurrences"] for v in ordered.values()),
            "note": "the same value has the same placeholder throughout this report; "
            "kinds: " + "; ".join(f"{k}: {d}" for k, d in KINDS.items()),
        }

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
        text, _exact = text_of(data)
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
        hint = _key_hint(key)
        stripped = value.strip()
        if hint and not _null(stripped) and "<" not in stripped:
            if hint == "secret":
                return self.placeholder("secret", stripped)
            if hint in ("serial", "uuid", "machine-id"):
                kind, k = _classify_id(hint, stripped)
                return self.placeholder(kind, k, stripped)
            if hint == "host" and not re.fullmatch(r"\d+", stripped):
                self.add_host(stripped)
                return self.placeholder("host", self._host_key(stripped))
            if hint == "user" and stripped.lower() not in NOT_USERS and not re.fullmatch(r"\d+", stripped):
                self.add_user(stripped)
                return self.placeholder("user", stripped.lower())
        if (
            parent == "env"
            and key
            and key not in _SETTINGS
            and not key.startswith(_OVERRIDE)
            and looks_secret(value)
        ):
            return self.placeholder("secret", stripped)
        return self._apply(value, self._spans(value), xml=False)

    def _redact_json_text(self, text: str) -> str:
        out: List[str] = []
        pos = 0
        for kind, start, end, key, parent in _json_walk(text):
            gap = text[pos:start]
            out.append(self._apply(gap, self._spans(gap), xml=False) if gap.strip() else gap)
            lit = text[start:end]
            if kind in ("str", "key"):
                value = _json_string(lit)
                if value is None:  # not a valid JSON string: redact its raw text
                    lit = self._apply(lit, self._spans(lit), xml=False)
                else:
                    new = (
                        self._redact_value(value, key, parent)
                        if kind == "str"
                        else self._apply(value, self._spans(value), xml=False)
                    )
                    lit = lit if new == value else json.dumps(new, ensure_ascii=False)
            elif kind == "num" and _key_hint(key) in ("serial", "uuid", "machine-id") and not _null(lit):
                k, v = _classify_id(_key_hint(key) or "serial", lit)
                lit = json.dumps(self.placeholder(k, v, lit))
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
            self._r_secrets,
            self._r_names_in_context,
            self._r_ids_in_context,
            self._r_known_ids,
            self._r_gpu_uuid,
            self._r_uuid,
            self._r_product_id,
            self._r_mac,
            self._r_ipv6,
            self._r_ipv4,
            self._r_hex32,
            self._r_homes,
            self._r_user_paths,
            self._r_global_names,
        ]

    # Each rule yields (start, end, kind, key).
    def _r_secrets(self, text: str) -> Iterator[Span]:
        assignments = _SECRET_ASSIGN.finditer(text) if any(w in text for w in _SECRET_HINTS) else ()
        for m in assignments:
            if is_secret_name(m.group("name")) and not _null(m.group("v")):
                yield m.start("v"), m.end("v"), "secret", m.group("v")
        if any(p in text for p in _TOKEN_PREFIXES):
            for m in _TOKEN_SHAPES.finditer(text):
                yield m.start(), m.end(), "secret", m.group(0)
        if "://" in text:
            for m in _URL_CRED.finditer(text):
                yield m.start("cred"), m.end("cred"), "secret", m.group("cred")

    def _r_names_in_context(self, text: str) -> Iterator[Span]:
        for rx in _PROMPTS + [_BUILDER]:
            for m in rx.finditer(text):
                if not _null(m.group("user")) and m.group("user").lower() not in NOT_USERS:
                    yield m.start("user"), m.end("user"), "user", m.group("user").lower()
                if not _null(m.group("host")):
                    yield m.start("host"), m.end("host"), "host", self._host_key(m.group("host"))
        for m in _UNAME.finditer(text):
            if not _null(m.group("host")):
                yield m.start("host"), m.end("host"), "host", self._host_key(m.group("host"))
        for m in _HOST_KV.finditer(text):
            v = m.group("host")
            if not _null(v) and "<" not in v:
                yield m.start("host"), m.end("host"), "host", self._host_key(v)
        for m in _USER_KV.finditer(text):
            v = m.group("user")
            if not _null(v) and v.lower() not in NOT_USERS and "<" not in v:
                yield m.start("user"), m.end("user"), "user", v.lower()

    def _r_ids_in_context(self, text: str) -> Iterator[Span]:
        low = text.lower()
        if not any(k in low for k in _ID_HINTS):
            for m in _MAC_TMP.finditer(text):
                yield m.start("v"), m.end("v"), "path", m.group("v")
            return
        for m in _ID_KV.finditer(text):
            v = m.group("v")
            if _null(v) or "<" in v or "&lt;" in v:
                continue
            key = m.group("key").lower()
            hint = (
                "machine-id" if re.search(r"machine|hardware|platform|provisioning|kern\.", key) else "serial"
            )
            s, e = m.start("v"), m.end("v")
            if v.startswith("{") and v.endswith("}"):
                s, e, v = s + 1, e - 1, v[1:-1]
            kind, k = _classify_id(hint, v)
            yield s, e, kind, k
        for m in _XML_ID.finditer(text):
            v = m.group("v").strip()
            if not _null(v) and "&lt;" not in v:
                kind, k = _classify_id("serial", v)
                yield m.start("v"), m.end("v"), kind, k
        for s, e, hint, value in _csv_cells(text):
            if hint == "host":
                yield s, e, "host", self._host_key(value)
            elif hint == "user":
                yield s, e, "user", value.lower()
            elif hint == "secret":
                yield s, e, "secret", value
            else:
                kind, k = _classify_id(hint, value)
                yield s, e, kind, k
        for m in _KFD_UNIQUE.finditer(text):
            if int(m.group("v")) >= 1 << 16:  # real ids are 64-bit; small ones are our pseudonyms
                yield m.start("v"), m.end("v"), "gpu-uuid", "amd:%x" % int(m.group("v"))
        for rx in (_LSPCI_DSN, _LSUSB_SERIAL):
            for m in rx.finditer(text):
                if not _null(m.group("v")):
                    yield m.start("v"), m.end("v"), "serial", m.group("v").lower()
        for m in _MAC_TMP.finditer(text):
            yield m.start("v"), m.end("v"), "path", m.group("v")

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
        if "GPU-" not in text and "MIG-" not in text:
            return
        for m in _GPU_UUID.finditer(text):
            if not _null(m.group("hex")):
                yield m.start(), m.end(), "gpu-uuid", m.group("hex").lower().replace("-", "")
        for m in _AMD_UUID.finditer(text):
            if not _null(m.group("hex")):
                yield m.start(), m.end(), "gpu-uuid", "amd:%x" % int(m.group("hex"), 16)

    def _r_uuid(self, text: str) -> Iterator[Span]:
        for m in _UUID.finditer(text):
            if not self._in_fact(m.group(0)) and not _null(m.group("hex")):
                yield m.start(), m.end(), "uuid", m.group("hex").lower()

    def _r_product_id(self, text: str) -> Iterator[Span]:
        for m in _PRODUCT_ID.finditer(text):
            if not self._in_fact(m.group(0)):
                yield m.start(), m.end(), "product-id", m.group(0).upper()

    def _r_mac(self, text: str) -> Iterator[Span]:
        for m in _MAC.finditer(text):
            v = m.group(0)
            norm = re.sub(r"[:-]", "", v).lower()
            if norm in ("000000000000", "ffffffffffff") or self._in_fact(v):
                continue
            yield m.start(), m.end(), "mac", norm

    def _r_ipv6(self, text: str) -> Iterator[Span]:
        for m in _IPV6.finditer(text):
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
        for m in _IPV4.finditer(text):
            v = m.group(0)
            try:
                addr = ipaddress.IPv4Address(v)
            except ValueError:
                continue
            if addr.is_loopback or addr.is_unspecified or v == "255.255.255.255":
                continue
            if self._in_fact(v) or _VERSION_BEFORE.search(text[max(0, m.start() - 24) : m.start()]):
                continue
            yield m.start(), m.end(), "ip", v

    def _r_hex32(self, text: str) -> Iterator[Span]:
        for m in _HEX32.finditer(text):
            v = m.group(0)
            if not self._in_fact(v) and len(set(v)) > 2:
                yield m.start(), m.end(), "machine-id", v.lower()

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
        for rx in (_POSIX_HOME, _WIN_HOME):
            for m in rx.finditer(text):
                g = "user1" if m.group("user1") else "user2"
                u = m.group(g) or ""
                if u and u.lower() not in NOT_USERS and not _null(u):
                    yield m.start(g), m.end(g), "user", u.lower()

    def _r_global_names(self, text: str) -> Iterator[Span]:
        if self._global_re is None:
            names = [
                n
                for n in self._names
                if len(n) >= 2
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


def _key_hint(key: Optional[str]) -> Optional[str]:
    if not key:
        return None
    if is_secret_name(key):
        return "secret"
    k = re.sub(r"[^a-z0-9]+", "_", "_".join(_camel_words(key)))
    if "serial" in k:
        return "serial"
    if k in ("unique_id", "board_id", "pdi", "gpu_pdi", "host_id", "gpu_fabric_guid"):
        return "serial"
    if k in ("machine_id", "hardware_uuid", "platform_uuid", "provisioning_udid"):
        return "machine-id"
    if k.endswith(("uuid", "guid", "udid")):
        return "uuid"
    if k.replace("_", "") in {h.replace("_", "") for h in _HOST_KEYS}:
        return "host"
    if k.replace("_", "") in {u.replace("_", "") for u in _USER_KEYS}:
        return "user"
    return None


_NV_SHAPE = re.compile(rf"((?:(?:MIG|GPU)-){{1,2}}){_HEX_UUID}", re.I)


def _shaped(placeholder: str, kind: str, original: str) -> str:
    """GPU ids and serial numbers keep the shape their parsers check (so a replay reads them as
    ids again), in a form no real device has: GPU-00000000-0000-0000-0000-000000000001,
    GPU-0000000000000001, 0x0000000000000001, REDACTED-SERIAL-1. Everything else is `<kind-N>`."""
    n = int(placeholder.rsplit("-", 1)[1].rstrip(">"))
    o = original.strip()
    if kind == "gpu-uuid":
        m = _NV_SHAPE.fullmatch(o)
        if m:
            return f"{m.group(1)}00000000-0000-0000-0000-{n:012x}"
        if re.fullmatch(r"GPU-[0-9A-Fa-f]{16}", o):
            return f"GPU-{n:016x}"
        if re.fullmatch(r"0x[0-9A-Fa-f]{1,16}", o):
            return f"0x{n:016x}"
        if re.fullmatch(r"\d+", o):
            return str(n)
    if kind == "serial":
        return f"REDACTED-SERIAL-{n}"
    return placeholder


def _classify_id(hint: str, value: str) -> Tuple[str, str]:
    v = value.strip().strip("{}")
    m = re.fullmatch(rf"(?:(?:MIG|GPU)-){{1,2}}({_HEX_UUID})", v, re.I)
    if m:
        return "gpu-uuid", m.group(1).lower().replace("-", "")
    m = re.fullmatch(r"(?:GPU-|0x)([0-9A-Fa-f]{16})", v)
    if m:
        return "gpu-uuid", "amd:%x" % int(m.group(1), 16)
    if re.fullmatch(_HEX_UUID, v):
        return ("machine-id" if hint == "machine-id" else "uuid"), v.lower()
    return ("machine-id" if hint == "machine-id" else "serial"), v.lower()


def _json_walk(text: str) -> Iterator[Tuple[str, int, int, Optional[str], Optional[str]]]:
    """JSON tokens that carry data, with the key they belong to and their container's key.
    Yields (kind, start, end, key, parent) with kind "key", "str" or "num". Works on truncated
    or slightly broken JSON: whatever is not a token is left to the caller's plain-text pass."""
    stack: List[Tuple[str, Optional[str]]] = []  # (container, key of the container)
    pending: Optional[str] = None
    expect_key = False
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok in "{[":
            stack.append(
                (tok, pending if stack and stack[-1][0] == "{" else (stack[-1][1] if stack else None))
            )
            expect_key = tok == "{"
            pending = None
            continue
        if tok in "}]":
            if stack:
                stack.pop()
            expect_key = False
            continue
        if tok == ",":
            expect_key = bool(stack) and stack[-1][0] == "{"
            if expect_key:
                pending = None
            continue
        if tok == ":":
            expect_key = False
            continue
        in_obj = bool(stack) and stack[-1][0] == "{"
        parent = stack[-1][1] if stack else None
        if tok.startswith('"') and in_obj and expect_key:
            pending = _json_string(tok)
            yield "key", m.start(), m.end(), None, parent
            continue
        if in_obj:
            key, outer = pending, parent
        else:
            key, outer = parent, (stack[-2][1] if len(stack) >= 2 else None)
        yield ("str" if tok.startswith('"') else "num"), m.start(), m.end(), key, outer


def _json_string(literal: str) -> Optional[str]:
    try:
        value = json.loads(literal, strict=False)  # control characters in a pasted capture
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _json_strings(text: str) -> Iterator[Tuple[Optional[str], str, Optional[str]]]:
    for kind, s, e, key, parent in _json_walk(text):
        if kind == "str":
            v = _json_string(text[s:e])
            if v is not None:
                yield key, v, parent
