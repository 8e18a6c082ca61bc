"""The JSON Schemas of `mlprobe install --json`, `mlprobe bundle --json` and `mlprobe diff --json`
(`mlprobe schema install|bundle|diff`): the keys every reader may rely on and their types. The
documents are built by install/steps.py, install/apply.py, commands/bundle.py and report/diff.py; a
contract test validates real outputs against these. Pure data."""

from __future__ import annotations

from typing import Any, Dict

from .docversion import with_id

_STR = {"type": "string"}
_STR_OR_NULL = {"type": ["string", "null"]}
_STRS = {"type": "array", "items": _STR}
_OBJ = {"type": "object"}
_DRAFT = "https://json-schema.org/draft/2020-12/schema"

_PROBLEM = {"type": "object", "required": ["ref", "what", "why", "next"],
            "properties": {"ref": _STR, "what": _STR, "why": _STR_OR_NULL, "next": _STR_OR_NULL}}

_RECIPE = {
    "type": "object",
    "required": ["recipe", "title", "framework", "backend", "device", "packages", "sources", "env", "commands",
                 "imports", "warnings", "notes"],
    "properties": {
        "recipe": _STR, "title": _STR, "framework": _STR_OR_NULL, "backend": _STR_OR_NULL, "device": _STR_OR_NULL,
        "packages": _STRS, "recipe_index_url": _STR_OR_NULL, "recipe_extra_index_urls": _STRS,
        "variant_label": _STR_OR_NULL, "sources": _OBJ, "env": {"type": "object", "additionalProperties": _STR},
        "prepend": _OBJ, "config_files": {"type": "array"}, "shims": {"type": "array"}, "commands": _STRS,
        "imports": _STRS, "python_spec": _STR_OR_NULL, "verify_framework": _STR_OR_NULL, "pip_args": _STRS,
        "warnings": _STRS, "notes": _STRS,
    },
}

INSTALL_SCHEMA: Dict[str, Any] = with_id({
    "$schema": _DRAFT,
    "title": "mlprobe install --json",
    "description": "The install steps (`applied` false: nothing was changed) with the index checks and the "
                   "problems found before anything is done; with --apply (`applied` true) also `result`.",
    "type": "object",
    "required": ["applied", "recipe", "target", "packages", "steps", "index_checks", "problems", "ok"],
    "properties": {
        "applied": {"type": "boolean"},
        "recipe": _RECIPE,
        "target": _OBJ,
        "installer": {"type": ["string", "object", "null"]},
        "packages": {"type": "array"},
        "steps": {"type": "array", "items": {"type": "object", "required": ["kind", "text"],
                                             "properties": {"kind": _STR, "text": _STR,
                                                            "command": {"type": ["string", "array", "null"]}}}},
        "index_checks": {"type": "array"},
        "resolution": {"type": ["object", "null"]},
        "problems": {"type": "array", "items": _PROBLEM},
        "ok": {"type": "boolean"},
        "overrides": {"type": "object", "additionalProperties": _STR},
        "result": {"type": "object", "required": ["path", "python", "installed", "import_ok", "seconds"],
                   "properties": {"path": _STR_OR_NULL, "python": _STR_OR_NULL, "installed": {"type": "array"},
                                  "import_ok": {"type": ["boolean", "null"]}, "seconds": {"type": "number"},
                                  "verify": {"type": ["object", "null"]}, "pins": {"type": "array"},
                                  "pins_file": _STR_OR_NULL, "lock": {"type": ["string", "object", "null"]},
                                  "remarks": _STRS}},
    },
}, "install")

BUNDLE_SCHEMA: Dict[str, Any] = with_id({
    "$schema": _DRAFT,
    "title": "mlprobe bundle --json",
    "description": "A bundle for another (offline) machine: the folder, its lock and every wheel in it.",
    "type": "object",
    "required": ["recipe", "folder", "lock", "target", "python_version", "platforms", "files",
                 "provided_by_target", "bytes", "seconds"],
    "properties": {
        "recipe": _STR, "folder": _STR, "lock": _STR, "target": _STR, "python_version": _STR_OR_NULL,
        "platforms": _STRS,
        "files": {"type": "array", "items": {"type": "object", "required": ["name", "version", "file", "sha256", "size"],
                                             "properties": {"name": _STR, "version": _STR, "file": _STR,
                                                            "sha256": _STR, "size": {"type": "integer"}}}},
        "provided_by_target": {"type": "array"},
        "bytes": {"type": "integer"}, "seconds": {"type": "number"},
    },
}, "bundle")

_SIDE = {"type": "object", "required": ["path", "kind"], "properties": {"path": _STR, "kind": _STR}}
_LEAF = {"type": ["string", "number", "boolean", "null", "array"]}

DIFF_SCHEMA: Dict[str, Any] = with_id({
    "$schema": _DRAFT,
    "title": "mlprobe diff --json",
    "description": "What differs between two machines (reports, scan JSONs or capture folders), section by "
                   "section; `same` is true when nothing compared differs.",
    "type": "object",
    "required": ["a", "b", "same", "differences", "compared", "plan_compared"],
    "properties": {
        "a": _SIDE, "b": _SIDE, "same": {"type": "boolean"},
        "differences": {"type": "array", "items": {"type": "object", "required": ["section", "item", "a", "b"],
                                                   "properties": {"section": _STR, "item": _STR, "a": _LEAF,
                                                                  "b": _LEAF}}},
        "compared": _STRS, "plan_compared": {"type": "boolean"},
    },
}, "diff")

__all__ = ["BUNDLE_SCHEMA", "DIFF_SCHEMA", "INSTALL_SCHEMA"]
