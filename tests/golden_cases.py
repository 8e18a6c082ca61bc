"""The golden outputs: `scan --replay DIR --json` and `plan --replay DIR --json` for every fixture
bundle, stored under tests/golden/ so that a change of any answer shows up as a diff.

Regenerate (only for an intended change, named in the commit) with `python -m tests.golden_cases`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
COMMANDS = ("scan", "plan")
# Environment that changes a plan: unset while the golden outputs are made and compared.
ENV_DROPPED = ("MLPROBE_PYTORCH_INDEX_URL", "MLPROBE_AMD_INDEX_URL")
VOLATILE = {"mlprobe_version": "<version>", "seconds": "<seconds>"}


def bundles() -> List[str]:
    return sorted(p.name for p in (ROOT / "fixtures").iterdir() if p.is_dir() and (p / "SOURCE.md").is_file())


def _normalise(doc: Any) -> Any:
    """Volatile fields out: mlprobe's version, probe timings and the checkout's own location."""
    if isinstance(doc, dict):
        return {k: (VOLATILE[k] if k in VOLATILE else _normalise(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_normalise(v) for v in doc]
    if isinstance(doc, str):
        return doc.replace(str(ROOT), "<root>")
    return doc


@contextlib.contextmanager
def _clean_env() -> Iterator[None]:
    saved = {k: os.environ.pop(k) for k in ENV_DROPPED if k in os.environ}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.update(saved)


def run(command: str, bundle: str) -> Tuple[int, Any]:
    """(exit code, normalised JSON) of `mlprobe COMMAND --replay fixtures/BUNDLE --json`."""
    from mlprobe.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _clean_env(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["-q", command, "--replay", f"fixtures/{bundle}", "--json"])
    return code, _normalise(json.loads(out.getvalue()))


def golden_path(command: str, bundle: str) -> Path:
    return GOLDEN / command / f"{bundle}.json"


def expected(command: str, bundle: str) -> Dict[str, Any]:
    doc: Dict[str, Any] = json.loads(golden_path(command, bundle).read_text(encoding="utf-8"))
    return doc


def regenerate() -> None:
    for command in COMMANDS:
        folder = GOLDEN / command
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.json"):
            old.unlink()
        for bundle in bundles():
            code, doc = run(command, bundle)
            text = json.dumps({"exit_code": code, "output": doc}, indent=1, ensure_ascii=False) + "\n"
            golden_path(command, bundle).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    regenerate()
