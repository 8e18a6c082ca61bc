"""Every fixture bundle replays to its SOURCE.md ground truth, and its report fits the schema."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import facts_to_report, scan

from .conftest import fixture_dirs, ground_truth
from .matching import mismatches

DIRS = fixture_dirs()


@pytest.mark.parametrize("folder", DIRS, ids=[d.name for d in DIRS])
def test_fixture_replays_to_ground_truth(folder: Path, scan_schema: dict) -> None:
    expected = ground_truth(folder)
    report = facts_to_report(scan(ReplayHost(folder)))
    jsonschema.validate(report, scan_schema)
    problems = mismatches(expected, report)
    assert not problems, "\n".join(problems)


def test_there_are_fixtures() -> None:
    assert len(DIRS) >= 6
