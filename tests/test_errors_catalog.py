"""docs/ERRORS.md is the catalog of error references: every reference the code uses is listed there
with what it means and what to do, and every row there is used by the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

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


# -- one reference, one kind of fault ----------------------------------------------------------------

# The exit status a command layer error names, as the kind of fault it is (mlprobe/errors.py).
_EXIT_KINDS = {"EXIT_FAILURE": "failure", "EXIT_USAGE": "usage", "EXIT_UNAVAILABLE": "unavailable",
               "EXIT_INTERRUPTED": "interrupted"}


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _refs(node: Optional[ast.expr]) -> List[str]:
    """The references an argument names: a constant ("E513"), or the constants of `c.ref or "E501"`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _REF.fullmatch(node.value):
        return [node.value]
    if isinstance(node, ast.BoolOp):
        return [r for v in node.values for r in _refs(v)]
    return []


def _exit_kind(node: Optional[ast.expr]) -> Optional[str]:
    return "failure" if node is None else _EXIT_KINDS.get(_name(node))  # MlprobeError's default: EXIT_FAILURE


def _stage_kind(node: Optional[ast.expr]) -> Optional[str]:
    if node is None:
        return "failure"  # StageError's default kind
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def reference_kinds() -> Tuple[Dict[str, Dict[str, List[str]]], List[str]]:
    """Reference -> kind of fault -> where, for each form in which the code raises one with its kind:
    StageError(..., ref=, kind=) (kind "failure" when left out), MlprobeError(..., ref=, exit_code=)
    (EXIT_FAILURE when left out), and cli._json_error(argv, ref, what, why, next, exit_code). Also the
    places where a constant reference goes with a kind the scan cannot read (a variable)."""
    kinds: Dict[str, Dict[str, List[str]]] = {}
    unread: List[str] = []
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted((ROOT / "mlprobe").rglob("*.py"))}
    # a subclass of StageError (hook.HookError) takes the same ref= and kind=
    stage_errors = {"StageError"} | {node.name for tree in trees.values() for node in ast.walk(tree)
                                     if isinstance(node, ast.ClassDef)
                                     and any(_name(b) == "StageError" for b in node.bases)}
    for path, tree in trees.items():
        where = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = _name(node.func)
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            if func in stage_errors:
                refs, kind = _refs(kw.get("ref")), _stage_kind(kw.get("kind"))
            elif func == "MlprobeError":
                refs, kind = _refs(kw.get("ref")), _exit_kind(kw.get("exit_code"))
            elif func == "_json_error" and len(node.args) >= 6:
                refs, kind = _refs(node.args[1]), _exit_kind(node.args[5])
            else:
                continue
            for ref in refs:
                if kind is None:
                    unread.append(f"{ref} at {where}:{node.lineno}")
                else:
                    kinds.setdefault(ref, {}).setdefault(kind, []).append(f"{where}:{node.lineno}")
    return kinds, unread


def test_each_reference_names_one_kind_of_fault() -> None:
    """A reference is one kind of fault with one exit status: the same reference raised as a usage
    error in one place and as a failure in another (E509 once: a venv path that cannot be used, and
    `python -m venv` failing) says two things; each gets a reference of its own."""
    kinds, unread = reference_kinds()
    mixed = {ref: by_kind for ref, by_kind in kinds.items() if len(by_kind) > 1}
    assert not mixed, f"one reference, several kinds of fault (give each its own reference): {mixed}"
    assert not unread, f"a reference whose kind the scan cannot read (write the kind as a constant): {unread}"


def test_the_kind_scan_reads_each_form_the_code_writes() -> None:
    kinds, _ = reference_kinds()
    assert set(kinds["E513"]) == {"usage"}  # StageError(..., ref="E513", kind="usage")
    assert set(kinds["E511"]) == {"failure"}  # StageError(..., ref="E511", kind="failure")
    assert set(kinds["E542"]) == {"failure"}  # StageError(..., ref="E542"): the default kind
    assert set(kinds["E701"]) == {"usage"}  # MlprobeError(..., ref="E701", exit_code=EXIT_USAGE)
    assert set(kinds["E002"]) == {"usage"}  # _json_error(argv, "E002", ..., EXIT_USAGE)
    assert set(kinds["E501"]) == {"unavailable"}  # StageError(..., ref=c.ref or "E501", kind="unavailable")
    # every reference of the catalog is found with its kind, but those only pip's and uv's failures
    # (install/resolve.py's Failure) and the index checks (install/index.py) carry: the stage that
    # meets one gives its kind (a dry run: unavailable; an install that ran: failure)
    by_kind_only_elsewhere = {ref for ref, files in used().items()
                              if files <= {"mlprobe/install/resolve.py", "mlprobe/install/index.py",
                                           "mlprobe/install/preflight.py"}}
    assert set(catalog()) - set(kinds) <= by_kind_only_elsewhere, set(catalog()) - set(kinds) - by_kind_only_elsewhere
