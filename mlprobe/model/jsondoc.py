"""JSON documents in and out (reports, fleet reports, scan JSON): numbers are what JSON allows and what
a document of mlprobe's holds. Python's decoder accepts `NaN`, `Infinity`, `1e999` (which becomes
inf) and integers of any size (`10**400`, which no float holds; 5000 digits, which int() refuses);
each of them crashed a reader further on or was written back as `Infinity`, which is not JSON. The
reader refuses them with an error naming the field; the writer never writes a non-finite number.

Reading is one pass of msgspec's decoder (it refuses NaN and Infinity, which are not JSON, and
literals beyond a double) after one cheap look at the bytes for an integer that could be out of range
(20 digits in a row): a document with such a literal, or one msgspec refuses
for any reason (not UTF-8, nested too deeply, a lone surrogate escape that Python's decoder accepts),
goes through Python's decoder with the hooks below, which name the field or give the decoder's own
error. A clean document never pays for the hooks."""

from __future__ import annotations

import json
import math
import re
from typing import Any, List, Union

import msgspec

# No count, size or id in a document is beyond 64 bits (memory in bytes, PCI and KFD ids).
MAX_INT = 2 ** 64
# A number literal longer than this is no measurement.
MAX_LITERAL = 400
# Cheap test before the careful parse: a literal with 20+ digits, a 3-digit exponent, or a constant.
_SUSPECT_STR = re.compile(r"[0-9]{20,}|[eE][+-]?[0-9]{3,}|Infinity|NaN")
_SUSPECT_BYTES = re.compile(rb"[0-9]{20,}|[eE][+-]?[0-9]{3,}|Infinity|NaN")
# msgspec refuses NaN, Infinity and literals beyond a double or beyond its integer parser (1e999,
# 5000 digits) itself; an integer of 20 digits or more it reads, so that is looked for first: one
# translation of the bytes (each digit -> 0, anything else -> a space) and one substring search, a
# fraction of what the regular expression above costs.
_FOLD = bytes(ord("0") if 48 <= b <= 57 else ord(" ") for b in range(256))
_RUN = b"0" * 20
_decode = msgspec.json.Decoder().decode


def suspect(data: "bytes | bytearray | memoryview") -> bool:
    """Whether the bytes hold 20 digits in a row: an integer literal msgspec reads that may be beyond
    what a document holds (or only a long number inside a string)."""
    return _RUN in bytes(data).translate(_FOLD)


class BadNumber(ValueError):
    """A number no document of mlprobe's holds; the message names the field (`scan.gpus[0].memory_bytes`)."""

    def __init__(self, path: str, literal: str, why: str) -> None:
        shown = literal if len(literal) <= 40 else f"{literal[:16]}... ({len(literal)} characters)"
        super().__init__(f"{path or 'the document'}: the number {shown} is {why}")
        self.path, self.literal, self.why = path, literal, why


class _Bad:
    __slots__ = ("literal", "why")

    def __init__(self, literal: str, why: str) -> None:
        self.literal, self.why = literal, why


def _int(s: str) -> Any:
    if len(s) > 21:
        return _Bad(s, f"larger than any value a document holds (more than {MAX_INT.bit_length() - 1} bits)")
    v = int(s)
    if -MAX_INT < v < MAX_INT:
        return v
    return _Bad(s, "larger than any value a document holds (more than 64 bits)")


def _float(s: str) -> Any:
    if len(s) > MAX_LITERAL:
        return _Bad(s, f"longer than {MAX_LITERAL} characters")
    v = float(s)
    return v if math.isfinite(v) else _Bad(s, "too large for a number (it would be infinite)")


def _constant(s: str) -> Any:
    return _Bad(s, "not a finite number (JSON has no NaN or Infinity)")


def _find(obj: Any, path: str) -> None:
    if isinstance(obj, _Bad):
        raise BadNumber(path, obj.literal, obj.why)
    if isinstance(obj, dict):
        for k, v in obj.items():
            _find(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _find(v, f"{path}[{i}]")


def loads(data: Union[str, bytes, bytearray]) -> Any:
    """json.loads, refusing NaN, Infinity and numbers beyond what a document holds (BadNumber, a
    ValueError that names the field). Other errors are json.loads' own (JSONDecodeError,
    UnicodeDecodeError, RecursionError)."""
    raw: Any = data
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: Python's decoder says what it makes of it
            raw = None
    if raw is not None and not suspect(raw):
        try:
            return _decode(raw)
        except (msgspec.DecodeError, RecursionError):
            pass  # the careful way below gives the error (or reads what msgspec does not)
    return _careful(data)


def _careful(data: Union[str, bytes, bytearray]) -> Any:
    """Python's decoder with hooks on every number: BadNumber naming the field."""
    suspect_ = (_SUSPECT_STR.search(data) if isinstance(data, str) else _SUSPECT_BYTES.search(data))
    if suspect_ is None:
        return json.loads(data)
    found: List[int] = []

    def count(hook: Any) -> Any:
        def wrapped(s: str) -> Any:
            v = hook(s)
            if isinstance(v, _Bad):
                found.append(1)
            return v
        return wrapped

    doc = json.loads(data, parse_int=count(_int), parse_float=count(_float), parse_constant=count(_constant))
    if found:
        _find(doc, "")
    return doc


def check(obj: Any, path: str = "", depth: int = 0) -> None:
    """The same rule for a value that did not come through `loads` (a Ray task's result): BadNumber
    naming the first number outside it; ValueError for nesting deeper than any document's."""
    if depth > 200:
        raise ValueError(f"{path}: nested more than 200 levels deep")
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    if isinstance(obj, int):
        if not -MAX_INT < obj < MAX_INT:
            raise BadNumber(path, f"{'-' if obj < 0 else ''}an integer of {obj.bit_length()} bits",
                            "larger than any value a document holds (more than 64 bits)")
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise BadNumber(path, repr(obj), "not a finite number")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):  # JSON keys are strings; json.dumps would fail on a tuple later
                raise ValueError(f"{path or 'the document'}: a key that is not text ({type(k).__name__} {k!r:.40})")
            check(v, f"{path}.{k}" if path else str(k), depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            check(v, f"{path}[{i}]", depth + 1)
    else:
        raise ValueError(f"{path or 'the document'}: a {type(obj).__name__}, which no JSON document holds")


def finite(obj: Any) -> Any:
    """A copy with every non-finite float as null (for writing what a computation made)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps that never writes NaN or Infinity (not JSON): a non-finite float is written as null."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError as exc:
        if "out of range float" not in str(exc).lower() and "not json compliant" not in str(exc).lower():
            raise
        return json.dumps(finite(obj), allow_nan=False, **kwargs)
