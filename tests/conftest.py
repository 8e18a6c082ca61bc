from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hypothesis import settings

# Hypothesis profiles, chosen by MLPROBE_HYPOTHESIS_PROFILE (docs/testing.md):
# - dev (the default): each fuzz test's own number of examples, new ones each run (a failing example
#   is kept in .hypothesis/ and tried first next time);
# - ci (.ci/run): four times the examples (tests/fuzz.py examples() scales each test's own number),
#   on a fixed sequence, so that a submission's result does not depend on luck.
# No deadline in either: the tests run in parallel on a shared machine, where a slow example is load.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", derandomize=True, database=None, deadline=None, max_examples=400)
HYPOTHESIS_PROFILE = os.environ.get("MLPROBE_HYPOTHESIS_PROFILE") or "dev"
if HYPOTHESIS_PROFILE not in ("dev", "ci"):
    raise pytest.UsageError(f"MLPROBE_HYPOTHESIS_PROFILE={HYPOTHESIS_PROFILE!r}: the profiles are dev and ci")
settings.load_profile(HYPOTHESIS_PROFILE)

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
