"""`mlprobe report`'s document: the typed envelope the pipeline builds, as JSON, the way a reader of
the file sees it."""

from __future__ import annotations

from typing import Any, Dict

from mlprobe.pipeline import build_report as build_envelope


def build_report(*args: Any, **kwargs: Any) -> Dict[str, Any]:
    return build_envelope(*args, **kwargs).to_json()


def markdown(doc: Dict[str, Any], **kwargs: Any) -> str:
    """The Markdown report of a report document, read into the typed envelope the way `mlprobe report`
    holds it."""
    from mlprobe.model.report import ReportEnvelope
    from mlprobe.report.markdown import render_markdown

    return render_markdown(ReportEnvelope.from_json(doc), **kwargs)


def verify_doc(**changes: Any) -> Dict[str, Any]:
    """A real verify result (torch 2.13 on a CPU, fixtures/) with these top-level fields changed:
    what a test hands the report in place of running verify."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "fixtures" / "verify-linux-x86-64-torch-2.13-cpu" / "result.json"
    doc: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    doc.update(changes)
    return doc
