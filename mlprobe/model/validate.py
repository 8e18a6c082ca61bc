"""Checks on a report or scan JSON that mlprobe reads back (`diff`, `scan --replay report.json`):
a document from a newer mlprobe (a higher major `report_version`) is refused with a clear message,
and a field of the wrong type is named (`scan.cpu.flags is a JSON object, expected a list`) instead
of being read as empty."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .docversion import VersionError, _type_name, parse, version_of

# A report or scan JSON larger than this is not one mlprobe wrote (the raw captures it embeds are
# capped at 8 MiB each).
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024


class DocumentError(Exception):
    """A document mlprobe cannot read; the message names the field and what was expected."""


def check_version(doc: Dict[str, Any], where: str) -> None:
    """The version key of a report (`"schema": "mlprobe.report/N"`) or a scan JSON
    (`mlprobe.scan/N`), or an old document's `report_version: 1`: one from a newer mlprobe, or a key
    that is not a version, is refused. Documents without either (hand-made scan JSONs) are read as
    the first version."""
    kind = "report" if "scan" in doc else "scan"
    got = parse(doc.get("schema"))
    if got is not None and got[0] == "report" and kind == "scan":
        kind = "report"  # a report whose scan is missing: said by check_document's readers
    try:
        version_of(doc, kind)
    except VersionError as exc:
        raise DocumentError(f"{where}: {exc}") from None


# field -> expected type, for the parts of a scan that diff and plan read.
_OBJECT, _LIST, _STR, _NUM, _BOOL = "object", "list", "string", "number", "boolean"
_SCAN_FIELDS: List[Tuple[str, str]] = [
    ("os", _OBJECT), ("cpu", _OBJECT), ("memory", _OBJECT), ("python", _OBJECT), ("gpus", _LIST),
    ("runtimes", _OBJECT), ("frameworks", _LIST), ("usb_accelerators", _LIST), ("probes", _LIST),
    ("warnings", _LIST), ("overrides", _OBJECT),
]
_CPU_FIELDS = [("flags", _LIST), ("vendor", _STR), ("model", _STR), ("arch", _STR), ("cores", _NUM),
               ("threads", _NUM), ("x86_64_level", _NUM)]
_GPU_FIELDS = [("vendor", _STR), ("name", _STR), ("driver_version", _STR), ("compute_capability", _STR),
               ("gfx_target", _STR), ("memory_bytes", _NUM), ("apis", _LIST), ("sources", _LIST)]
_PY_FIELDS = [("version", _STR), ("implementation", _STR), ("in_venv", _BOOL)]
_FW_FIELDS = [("name", _STR), ("version", _STR), ("flavour", _STR)]


def _is(v: Any, kind: str) -> bool:
    if v is None:
        return True  # null means unknown, for every field
    if kind == _OBJECT:
        return isinstance(v, dict)
    if kind == _LIST:
        return isinstance(v, list)
    if kind == _STR:
        return isinstance(v, str)
    if kind == _NUM:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, bool)


def _fields(obj: Dict[str, Any], spec: List[Tuple[str, str]], path: str) -> None:
    for key, kind in spec:
        if key in obj and not _is(obj[key], kind):
            raise DocumentError(f"{path}.{key} is {_type_name(obj[key])}, expected a {kind}")


def _items(obj: Dict[str, Any], key: str, path: str, spec: Optional[List[Tuple[str, str]]],
           item_kind: str = _OBJECT) -> None:
    for i, item in enumerate(obj.get(key) or []):
        where = f"{path}.{key}[{i}]"
        if not _is(item, item_kind) or item is None:
            raise DocumentError(f"{where} is {_type_name(item)}, expected a {item_kind}")
        if spec:
            _fields(item, spec, where)


def check_scan(scan: Any, path: str = "scan") -> None:
    """The types of the fields a scan report's readers rely on."""
    if not isinstance(scan, dict):
        raise DocumentError(f"{path} is {_type_name(scan)}, expected a JSON object")
    _fields(scan, _SCAN_FIELDS, path)
    cpu = scan.get("cpu") or {}
    _fields(cpu, _CPU_FIELDS, f"{path}.cpu")
    _items(cpu, "flags", f"{path}.cpu", None, _STR)
    _items(scan, "gpus", path, _GPU_FIELDS)
    _items(scan, "frameworks", path, _FW_FIELDS)
    _fields(scan.get("python") or {}, _PY_FIELDS, f"{path}.python")


def check_capture_files(bundle: Any) -> Dict[str, Dict[str, Any]]:
    """A report's `capture_bundle`: `files` is an object of NAME -> {"text": str} or
    {"base64": str}. Returns the files; a field of another type is named (`capture_bundle.files.lspci.txt
    is a JSON list, expected a JSON object with "text" or "base64"`)."""
    if not isinstance(bundle, dict):
        raise DocumentError(f"capture_bundle is {_type_name(bundle)}, expected a JSON object")
    files = bundle.get("files")
    if not isinstance(files, dict):
        raise DocumentError(f"capture_bundle.files is {_type_name(files)}, expected a JSON object")
    for name, entry in files.items():
        where = f"capture_bundle.files.{name}"
        if not isinstance(entry, dict):
            raise DocumentError(f'{where} is {_type_name(entry)}, expected a JSON object with "text" or "base64"')
        if "text" in entry:
            if not isinstance(entry["text"], str):
                raise DocumentError(f"{where}.text is {_type_name(entry['text'])}, expected a string")
        elif "base64" in entry:
            if not isinstance(entry["base64"], str):
                raise DocumentError(f"{where}.base64 is {_type_name(entry['base64'])}, expected a string")
        else:
            raise DocumentError(f'{where} has neither "text" nor "base64"')
    return files


def check_document(doc: Any, where: str) -> None:
    """A report (`mlprobe report`) or a scan JSON (`mlprobe scan --json`)."""
    if not isinstance(doc, dict):
        raise DocumentError(f"{where} is {_type_name(doc)}, expected a JSON object")
    check_version(doc, where)
    if "scan" in doc:
        check_version(doc["scan"] if isinstance(doc["scan"], dict) else {}, f"{where} (scan)")
        check_scan(doc["scan"], "scan")
        for key in ("plan", "verify", "capture_bundle", "redactions"):
            if key in doc and doc[key] is not None and not isinstance(doc[key], dict):
                raise DocumentError(f"{key} is {_type_name(doc[key])}, expected a JSON object")
        if doc.get("capture_bundle") is not None:
            check_capture_files(doc["capture_bundle"])
    else:
        check_scan(doc, "scan")
