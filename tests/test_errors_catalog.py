"""docs/ERRORS.md is the catalog of error references: every reference the code uses is listed there
with what it means and what to do, and every row there is used by the code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Set

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "docs" / "ERRORS.md"
# A reference in the code: "E513" as a string, or named in a docstring or comment ("E511 when ...").
# Lint codes in `noqa` comments (E402) are not references.
_REF = re.compile(r"(?<![A-Za-z0-9_])E\d{3}(?![0-9])")
_NOQA = re.compile(r"#\s*noqa:[ A-Z0-9,]*")


def used() -> Dict[str, Set[str]]:
    """Reference -> the files of mlprobe/ that use it."""
    out: Dict[str, Set[str]] = {}
    for path in sorted((ROOT / "mlprobe").rglob("*")):
        if path.suffix not in (".py", ".json") or not path.is_file():
            continue
        text = _NOQA.sub("", path.read_text(encoding="utf-8"))
        for ref in _REF.findall(text):
            out.setdefault(ref, set()).add(str(path.relative_to(ROOT)))
    return out


def catalog() -> Dict[str, str]:
    """Reference -> its row (meaning | what to do), from the tables of docs/ERRORS.md."""
    rows: Dict[str, str] = {}
    for line in CATALOG.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*(E\d{3})\s*\|(.*)\|\s*$", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} is listed twice in docs/ERRORS.md"
            rows[m.group(1)] = m.group(2)
    return rows


def test_every_reference_in_the_code_is_in_the_catalog() -> None:
    missing = {ref: sorted(files) for ref, files in used().items() if ref not in catalog()}
    assert not missing, f"add these to docs/ERRORS.md (what it means | what to do): {missing}"


def test_every_row_of_the_catalog_is_used() -> None:
    unused = sorted(set(catalog()) - set(used()))
    assert not unused, f"docs/ERRORS.md lists references no code uses: {unused}"


def test_every_row_says_what_it_means_and_what_to_do() -> None:
    for ref, row in catalog().items():
        cells = [c.strip() for c in row.split(" | ")]
        assert len(cells) == 2 and all(len(c) > 10 for c in cells), (ref, row)


def test_the_scan_finds_references_in_each_form_the_code_writes() -> None:
    refs = used()
    assert "E513" in refs and "mlprobe/install/steps.py" in refs["E513"]  # ref="E513"
    assert "E002" in refs  # a positional argument: _json_error(argv, "E002", ...)
    assert "E402" not in refs  # the lint code in the payload's noqa comments is ruff's, not mlprobe's
