"""Reading the report files a person hands to `mlprobe fleet merge` (gathered by ssh, Slurm or
configuration management). Anything that is not a report mlprobe can read is a clear error naming
the file, never a traceback: a missing or unreadable file, a FIFO or device, a file larger than any
report, bytes that are not UTF-8 JSON, JSON nested deeply enough to exhaust the parser, a document
of the wrong shape or from a newer mlprobe."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import StageError
from ..scan.capture import UnreadableFile, read_regular
from ..model import jsondoc
from ..model.jsontypes import JsonObject
from ..model.validate import DocumentError, check_document
from ..ui import display_path
from .model import NodeSummary
from .summary import summarize

# A report without --include-raw is ~20 KiB; with raw captures (8 MiB each at most) a few MiB.
MAX_REPORT_BYTES = 64 * 1024 * 1024


class ReportFileError(Exception):
    """One input file that is not a readable report; the message names the file."""


@dataclass(frozen=True)
class Loaded:
    path: str  # as given (display-safe)
    summary: NodeSummary
    report: Optional[JsonObject]  # the whole report, only when asked to keep it


def is_report_name(name: str) -> bool:
    """A file a folder stands for: `*.json` in any case (`B.JSON` too), not hidden."""
    return name.lower().endswith(".json") and not name.startswith(".")


def _identity(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def select_inputs(paths: Sequence["str | os.PathLike[str]"]) -> Tuple[List[str], List[str]]:
    """(files, notes). Files as given; a folder stands for the *.json files directly inside it
    (sorted, any case of the suffix), so that 10,000 reports need not go through the command line.
    A file reached twice (given twice, by another path, through a link, or also inside a folder
    given) is read once; the notes say so, and name the files a folder holds that are left out."""
    out: List[str] = []
    notes: List[str] = []
    for p in paths:
        p = os.fspath(p)
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        if os.path.isdir(p):
            try:
                entries = sorted(os.listdir(p))
            except OSError as exc:
                raise StageError(f"cannot list the folder {display_path(p)}", why=exc.strerror or str(exc),
                                 next_step="check the folder's permissions", ref="E901",
                                 kind="usage") from None
            names = [n for n in entries if is_report_name(n)]
            other = [n for n in entries if not is_report_name(n) and not n.startswith(".")
                     and os.path.isfile(os.path.join(p, n))]
            if other:
                shown = ", ".join(display_path(n) for n in other[:5]) + (f" and {len(other) - 5} more"
                                                                          if len(other) > 5 else "")
                notes.append(f"{display_path(p)}: {len(other)} file(s) not named *.json left out ({shown})")
            out.extend(os.path.join(p, n) for n in names)
        else:
            out.append(p)
    seen: Dict[Tuple[int, int], str] = {}
    unique: List[str] = []
    for f in out:
        ident = _identity(f)
        if ident is not None and ident in seen:
            notes.append(f"{display_path(f)} is the same file as {display_path(seen[ident])}: counted once")
            continue
        if ident is not None:
            seen[ident] = f
        unique.append(f)
    return unique, notes


def expand_inputs(paths: Sequence["str | os.PathLike[str]"]) -> List[str]:
    """The files `fleet merge` reads for these arguments (select_inputs without its notes)."""
    return select_inputs(paths)[0]


def read_report(path: str) -> JsonObject:
    """The document in `path` (a report, or a scan JSON), checked; ReportFileError (naming the file)
    for anything else."""
    shown = display_path(path)
    try:
        data = read_regular(path, MAX_REPORT_BYTES + 1)
    except FileNotFoundError:
        raise ReportFileError(f"{shown}: no such file") from None
    except UnreadableFile as exc:
        raise ReportFileError(display_path(str(exc))) from None
    if len(data) > MAX_REPORT_BYTES:
        raise ReportFileError(f"{shown}: larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB, which no "
                              "mlprobe report is")
    if not data.strip():
        raise ReportFileError(f"{shown}: the file is empty")
    try:
        doc = jsondoc.loads(data)
    except UnicodeDecodeError:
        raise ReportFileError(f"{shown}: not a report (the bytes are not UTF-8 text)") from None
    except jsondoc.BadNumber as exc:
        raise ReportFileError(f"{shown}: not a report mlprobe can read ({display_path(str(exc))})") from None
    except json.JSONDecodeError as exc:
        raise ReportFileError(f"{shown}: not a report (not JSON: {exc.msg} at line {exc.lineno} "
                              f"column {exc.colno})") from None
    except RecursionError:
        raise ReportFileError(f"{shown}: not a report (JSON nested too deeply to read)") from None
    from .document import is_fleet

    if is_fleet(doc):
        raise ReportFileError(f"{shown}: this is a fleet report; `fleet merge` takes node reports "
                              "(`mlprobe report` files)")
    try:
        check_document(doc, shown)
    except DocumentError as exc:
        raise ReportFileError(f"{shown}: not a report mlprobe can read ({display_path(str(exc))})") from None
    except RecursionError:
        raise ReportFileError(f"{shown}: not a report (JSON nested too deeply to read)") from None
    if not isinstance(doc, dict) or not (isinstance(doc.get("scan"), dict) or "cpu" in doc or "gpus" in doc):
        raise ReportFileError(f"{shown}: not a report (no scan in it); make one with `mlprobe report -o FILE`")
    return doc


def load_one(path: str, keep_report: bool = False) -> Loaded:
    """The file's report, read once into its fleet summary (and kept whole on request)."""
    doc = read_report(path)
    try:
        summary = summarize(doc)
    except RecursionError:
        raise ReportFileError(f"{display_path(path)}: not a report (nested too deeply)") from None
    return Loaded(display_path(path), summary, doc if keep_report else None)


def load_many(paths: Sequence[str], keep_reports: bool = False, skip_bad: bool = False,
              on_progress: Optional[Callable[[int, int], None]] = None) -> Tuple[List[Loaded], List[str]]:
    """(loaded, problems). Without skip_bad the first bad file is an StageError (exit 2) naming it;
    with skip_bad each bad file becomes a line in problems and the rest are read."""
    loaded: List[Loaded] = []
    problems: List[str] = []
    for i, path in enumerate(paths):
        try:
            loaded.append(load_one(path, keep_reports))
        except ReportFileError as exc:
            if not skip_bad:
                raise StageError(
                    f"cannot read a report: {exc}",
                    next_step="pass files written by `mlprobe report -o FILE.json` (or `mlprobe scan --json`),"
                              " or add --skip-bad to leave out the files that are not",
                    ref="E902", kind="usage") from None
            problems.append(str(exc))
        if on_progress is not None and (i + 1) % 500 == 0:
            on_progress(i + 1, len(paths))
    return loaded, problems


def iter_names(paths: Sequence[str]) -> Iterator[Tuple[str, str]]:
    """(path, node name): the file name without .json, or the whole path where two share a name."""
    stems = [os.path.basename(p)[:-5] if p.lower().endswith(".json") else os.path.basename(p) for p in paths]
    seen: Dict[str, int] = {}
    for s in stems:
        seen[s] = seen.get(s, 0) + 1
    for p, s in zip(paths, stems):
        yield p, display_path(s if seen[s] == 1 and s else p)
