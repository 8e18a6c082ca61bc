"""One pass per report file for `fleet merge`: msgspec decodes the bytes straight into the typed
structs below, which hold only what the fleet reads (summary.summarize) and what
model/validate.check_document checks the type of; every other field is skipped by the decoder
(syntax-checked, never built into Python objects). This replaces the pre-scan of the text, the
decode into dicts and the hand validation of the old path for a report as `mlprobe report` writes
it.

A document the structs do not describe exactly goes the careful way (load.read_report: Python's
decoder with the number hooks, check_document, summarize of the whole dict), so that every error
message and every lenient reading stays what it was:
- anything msgspec refuses (not JSON, not UTF-8, NaN or Infinity anywhere, a number beyond a double
  or a 5000-digit literal in a field it reads, nested too deeply (msgspec stops at a depth Python's
  recursion limit sets), a field of another type than the struct's, a list item that is not an
  object, ...);
- an integer beyond 64 bits in a field the structs hold (msgspec reads any size);
- a scan JSON (no `scan` key), a fleet report, a report_version other than 1, a capture bundle.

- a literal of 20 digits or more, or with a 3-digit exponent, anywhere in the bytes (one translation and
  three substring searches, `_suspect`): msgspec checks the numbers of a field it skips for syntax only,
  so such a document is read the careful way, which refuses it naming the field as before.
With `--embed-reports`, which keeps the whole report, every file goes the careful way.

Reports of one hardware and software come out as the same decoded struct; its encoding is the key of
a cache, so that the summary (and its JSON) is made once per distinct report, not once per node."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from ..model import jsondoc
from ..model.docversion import CURRENT, parse
from ..model.contract import to_json
from ..scan.capture import UnreadableFile, read_regular
from ..ui import display_path
from .model import NodeSummary
from .summary import summarize

Num = Union[int, float, None]
Str = Optional[str]


class _S(Struct, omit_defaults=True, gc=False):
    pass


class Cpu(_S):
    vendor: Str = None
    model: Str = None
    arch: Str = None
    cores: Num = None
    threads: Num = None
    x86_64_level: Num = None
    flags: Optional[List[str]] = None


class Gpu(_S):
    vendor: Str = None
    name: Str = None
    driver_version: Str = None
    compute_capability: Str = None
    gfx_target: Str = None
    runtime_gfx_target: Str = None
    memory_bytes: Num = None
    apis: Optional[List[Raw]] = None
    sources: Optional[List[Raw]] = None


class Framework(_S):
    name: Str = None
    version: Str = None
    flavour: Str = None


class Python(_S):
    version: Str = None
    implementation: Str = None
    in_venv: Optional[bool] = None


class Os(_S):
    distro: Str = None
    system: Str = None


class Versioned(_S):
    version: Str = None
    driver_version: Str = None


class Runtimes(_S):
    cuda: Optional[Versioned] = None
    rocm: Optional[Versioned] = None


class Source(_S):
    kind: Str = None
    bundle: Str = None
    via: Str = None


class Scan(_S):
    schema: Str = None
    report_version: Num = None
    os: Optional[Os] = None
    cpu: Optional[Cpu] = None
    memory: Optional[Dict[str, Raw]] = None
    python: Optional[Python] = None
    gpus: Optional[List[Gpu]] = None
    runtimes: Optional[Runtimes] = None
    frameworks: Optional[List[Framework]] = None
    usb_accelerators: Optional[List[Raw]] = None
    probes: Optional[List[Raw]] = None
    warnings: Optional[List[Raw]] = None
    overrides: Optional[Dict[str, Raw]] = None
    source: Optional[Source] = None


class Recommended(_S):
    recipe: Str = None
    backend: Str = None
    index_url: Str = None
    packages: Optional[List[str]] = None
    env: Optional[Dict[str, str]] = None


class Installed(_S):
    package: Str = None
    version: Str = None
    build: Str = None
    status: Str = None
    message: Str = None


class Plan(_S):
    top: Optional[Dict[str, Str]] = None
    recommended: Optional[List[Recommended]] = None
    installed: Optional[List[Installed]] = None


class Speed(_S):
    images_per_s: Num = None


class VerifyResult(_S):
    framework: Str = None
    framework_version: Str = None
    device: Str = None
    name: Str = None
    kind: Str = None
    verdict: Str = None
    speed: Optional[Speed] = None


class Verify(_S):
    results: Optional[List[VerifyResult]] = None


class Report(_S):
    # present at all: not a node report the fast way (a fleet report, a capture bundle to check)
    fleet_version: Union[Any, UnsetType] = UNSET
    capture_bundle: Union[Any, UnsetType] = UNSET
    schema: Str = None
    report_version: Num = None
    mlprobe_version: Str = None
    scan: Union[Scan, UnsetType] = UNSET
    plan: Optional[Plan] = None
    verify: Optional[Verify] = None
    redactions: Optional[Dict[str, Raw]] = None


_decode_report = msgspec.json.Decoder(Report).decode
_encode = msgspec.json.Encoder().encode


def _version_ok(v: Num, schema: Str, kind: str) -> bool:
    """Today's key (`"schema": "mlprobe.report/2"`) or an old one's (`report_version: 1`), of a
    version this mlprobe reads; anything else (a fleet report, a newer version) goes the careful way."""
    if schema is not None:
        got = parse(schema)
        return got is not None and got[0] == kind and 1 <= got[1] <= CURRENT[kind] and v is None
    return v is None or (not isinstance(v, bool) and v == v and int(v) == 1)


def _big(v: Num) -> bool:
    return isinstance(v, int) and not -jsondoc.MAX_INT < v < jsondoc.MAX_INT


def _numbers(r: Report, scan: Scan) -> List[Num]:
    """The numbers of the structs (msgspec reads an integer of any size; jsondoc's limit is 64 bits)."""
    out: List[Num] = [r.report_version, scan.report_version]
    if scan.cpu is not None:
        out += [scan.cpu.cores, scan.cpu.threads, scan.cpu.x86_64_level]
    out += [g.memory_bytes for g in scan.gpus or ()]
    if r.verify is not None:
        out += [v.speed.images_per_s for v in r.verify.results or () if v.speed is not None]
    return out


# Each digit -> "0", "." -> ".", an exponent's letter -> "e", a sign -> "+", what may come before a
# value (":", ",", "[") -> ":", white space -> " ", anything else -> "a". One translation and a few
# substring searches then find every literal the careful reader refuses that msgspec would skip
# unbuilt in a field the structs do not hold: an integer beyond 64 bits, or a number with a 3-digit exponent
# in a value's place (a hex string such as a GPU's UUID, "...3e456...", is not one: a letter or a
# sign after letters comes before it).
_FOLD = bytes(ord("0") if 48 <= b <= 57 else b if b in b"." else ord("e") if b in b"eE"
              else ord("+") if b in b"+-" else ord(":") if b in b":,[" else ord(" ") if b in b" \t\r\n"
              else ord("a") for b in range(256))


def _exponent_in_value(folded: bytes, hit: int) -> bool:
    j = hit + 1  # the hit starts at the mantissa's last digit
    while j > 0 and folded[j - 1] in b"0.":
        j -= 1
    if j > 0 and folded[j - 1] == ord("+"):
        j -= 1
    while j > 0 and folded[j - 1] == ord(" "):
        j -= 1
    return j == 0 or folded[j - 1] == ord(":")


def _suspect(data: bytes) -> bool:
    folded = data.translate(_FOLD)
    hit = folded.find(b"0" * 20)
    while hit >= 0:  # 21 digits or more are beyond 64 bits; 20 may be (2**64 - 1 has 20)
        if folded[hit + 20:hit + 21] == b"0" or int(data[hit:hit + 20]) >= jsondoc.MAX_INT:
            return True
        hit = folded.find(b"0" * 20, hit + 20)
    for pattern in (b"0e000", b"0e+000"):
        hit = folded.find(pattern)
        while hit >= 0:
            if _exponent_in_value(folded, hit):
                return True
            hit = folded.find(pattern, hit + 1)
    return False


def fast_report(data: bytes) -> Optional[bytes]:
    """The encoded struct of a report the fast way can read (the cache key), or None where the
    careful way must read it (also a document with a literal the careful reader may refuse, in any
    field, so that both ways refuse the same files)."""
    if _suspect(data):
        return None
    try:
        r = _decode_report(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if (r.fleet_version is not UNSET or r.capture_bundle is not UNSET or isinstance(r.scan, UnsetType)
            or not _version_ok(r.report_version, r.schema, "report")
            or not _version_ok(r.scan.report_version, r.scan.schema, "scan")
            or any(_big(v) for v in _numbers(r, r.scan))):
        return None
    return _encode(r)


# One node's answer: ("ok", digest of its facts' JSON) or ("bad", why, naming the file).
Entry = Tuple[str, str]


@dataclass
class Chunk:
    """What reading a run of files gives: one entry per file, in order, and the facts' JSON of each
    digest named there (each distinct one once)."""

    entries: List[Entry] = field(default_factory=list)
    facts: Dict[str, bytes] = field(default_factory=dict)


# encoded struct -> (digest, facts JSON): the same report is summarised once per process
_CACHE: Dict[bytes, Tuple[str, bytes]] = {}
_CACHE_MAX = 4096


def facts_json(summary: NodeSummary) -> bytes:
    """A node's `facts` as the fleet report writes them (jsondoc.dumps never writes NaN; msgspec
    writes a non-finite float as null)."""
    return _encode(to_json(summary))


def _digest(facts: bytes) -> str:
    return hashlib.blake2b(facts, digest_size=16).hexdigest()


def read_facts(path: str) -> Tuple[str, bytes]:
    """(digest, facts JSON) of one report file; ReportFileError naming the file."""
    from .load import MAX_REPORT_BYTES, ReportFileError, load_one

    try:
        data = read_regular(path, MAX_REPORT_BYTES + 1)
    except (FileNotFoundError, UnreadableFile):
        data = b""  # the careful way reads it again and words the error
    key = fast_report(data) if 0 < len(data) <= MAX_REPORT_BYTES else None
    if key is not None:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        try:
            summary = summarize(json.loads(key))
        except RecursionError:
            raise ReportFileError(f"{display_path(path)}: not a report (nested too deeply)") from None
    else:
        summary = load_one(path).summary
    facts = facts_json(summary)
    out = (_digest(facts), facts)
    if key is not None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = out
    return out


def read_chunk(paths: Sequence[str]) -> Chunk:
    """Read these files (in a worker process, a Ray task or here)."""
    from .load import ReportFileError

    chunk = Chunk()
    for path in paths:
        try:
            digest, facts = read_facts(path)
        except ReportFileError as exc:
            chunk.entries.append(("bad", str(exc)))
            continue
        chunk.entries.append(("ok", digest))
        chunk.facts.setdefault(digest, facts)
    return chunk


def read_chunk_plain(paths: Sequence[str]) -> Tuple[List[Entry], Dict[str, bytes]]:
    """read_chunk as plain values (what crosses a process or Ray boundary)."""
    c = read_chunk(paths)
    return c.entries, c.facts
