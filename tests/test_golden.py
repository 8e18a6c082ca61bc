"""Every fixture bundle gives the same `scan --json` and `plan --json` as the stored golden output
(tests/golden/; regenerate with `python -m tests.golden_cases` only for an intended change)."""

from __future__ import annotations

import pytest

from tests.golden_cases import COMMANDS, bundles, expected, golden_path, run


def test_every_bundle_has_golden_outputs() -> None:
    missing = [f"{c}/{b}" for c in COMMANDS for b in bundles() if not golden_path(c, b).is_file()]
    assert not missing, f"no golden output for {missing}; run python -m tests.golden_cases"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("bundle", bundles())
def test_golden(command: str, bundle: str) -> None:
    if not golden_path(command, bundle).is_file():
        pytest.fail(f"no golden output for {command} {bundle}")
    code, doc = run(command, bundle)
    want = expected(command, bundle)
    assert code == want["exit_code"]
    assert doc == want["output"]
