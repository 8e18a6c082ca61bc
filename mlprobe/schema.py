"""The JSON Schema of the scan report, shipped in the package (scan-report.schema.json)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scan-report.schema.json")


def schema_text() -> str:
    with open(_PATH, encoding="utf-8") as fh:
        return fh.read()


def scan_schema() -> Dict[str, Any]:
    doc = json.loads(schema_text())
    assert isinstance(doc, dict)
    return doc
