"""The shape of a verify result (`run_verify`'s return value, `mlprobe verify --json`), as JSON Schema.
The report embeds it; the contract test checks real results (fixtures/verify-*) against it."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ..model.jsontypes import JsonValue
from ..model.vocabulary import vocabulary
from .verdict import ALL

_NUM = {"type": ["number", "null"]}
_STR = {"type": ["string", "null"]}
_STAGE = {"type": ["object", "null"]}  # stage records: see payload/_harness.py (correctness_record, ...)

DEVICE_RESULT: Dict[str, Any] = {
    "type": "object",
    "required": ["framework", "framework_version", "python", "device", "kind", "name", "verdict", "reason",
                 "correctness", "learning", "speed", "proof", "speedup_vs_framework_cpu",
                 "speedup_vs_best_cpu", "failure"],
    "properties": {
        "framework": {"enum": list(vocabulary().payload_frameworks())},
        "framework_version": _STR, "python": {"type": "string"}, "device": {"type": "string"},
        "kind": _STR, "name": _STR, "api": _STR,
        "verdict": {"enum": list(ALL)}, "reason": {"type": "string"},
        "correctness": _STAGE, "learning": _STAGE, "proof": _STAGE, "failure": _STAGE,
        "speed": {"type": ["object", "null"], "properties": {
            "images_per_s": _NUM, "seconds_per_epoch": _NUM, "batch": {"type": "integer"},
            "repeats": {"type": "integer"}, "steps_per_repeat": {"type": "integer"},
            # what varies between the repeats ((fastest - slowest) / median; older results: median
            # absolute deviation / median), why they stopped, and how busy the machine was meanwhile
            "spread": _NUM, "stopped": {"enum": ["stable", "repeats", "budget", None]},
            "machine_load": {"type": ["object", "null"], "properties": {
                "cpus": {"type": ["integer", "null"]}, "load_1m": _NUM, "steal": _NUM, "others": _NUM,
                "busy": {"type": "boolean"}, "why": _STR}}}},
        # the verdict's ratio is speedup_vs_best_cpu (the best CPU figure of any framework in the run);
        # speedup_vs_framework_cpu is the same framework's own CPU path
        "speedup_vs_framework_cpu": _NUM, "speedup_vs_best_cpu": _NUM,
        "requested_by": _STR, "likely_cause": _STR,
        "listed_devices": {"type": ["array", "null"], "items": {"type": "string"}},
        "diagnosis": {"type": ["object", "null"], "properties": {
            "cause": {"type": "string"}, "evidence": {"type": "array", "items": {"type": "string"}},
            "next_step": {"type": "string"}, "fix": {"type": ["object", "null"]}}},
        "speed_spread": _NUM,
    },
}

VERIFY_SCHEMA: Dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "mlprobe verify result",
    "type": "object",
    "required": ["schema", "mlprobe_version", "started", "python", "request", "frameworks", "results",
                 "cpu_peers", "best_cpu", "tolerances", "summary", "exit_code", "wall_s"],
    "properties": {
        "schema": {"const": "mlprobe.verify/1"},
        "mlprobe_version": {"type": "string"},
        "started": {"type": "string"},
        "python": {"type": "object", "required": ["executable"]},
        "request": {"type": "object", "required": ["framework", "device", "quick"]},
        "frameworks": {"type": "array", "items": {"type": "object", "required": ["name", "status"],
                                                  "properties": {"status": {"enum": ["verified", "unavailable",
                                                                                     "not installed"]}}}},
        "results": {"type": "array", "items": DEVICE_RESULT},
        "cpu_peers": {"type": "array"},
        "best_cpu": {"type": ["object", "null"], "required": ["framework", "images_per_s", "seconds_per_epoch"],
                     "properties": {"spread": _NUM}},
        "tolerances": {"type": "object", "required": ["loss_rtol", "grad_rtol", "learn_target", "accelerated_at"]},
        "slow_gpus": {"type": "array", "items": {"type": "object", "required": [
            "framework", "device", "images_per_s", "peer_median", "peers", "slower_by", "message"]}},
        "summary": {"type": "array", "items": {"type": "string"}},
        "exit_code": {"type": "integer"},
        "wall_s": {"type": "number"},
    },
}


def validate(doc: Mapping[str, JsonValue]) -> List[str]:
    """Schema problems of a verify result document (`verify --json`, a file), as sentences (empty when it
    fits). Needs jsonschema."""
    import jsonschema  # type: ignore[import-untyped]

    validator = jsonschema.Draft202012Validator(VERIFY_SCHEMA)
    return [f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
