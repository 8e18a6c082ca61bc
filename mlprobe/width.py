"""mlprobe's width contract, in one place: prose is wrapped at the width with its continuation lines
indented (a sentence never restarts at column 0), while a printed command, a backquoted command, a
URL or a path is one unbroken piece that may run past the width, so it can be copied as it is. A
table too wide for the width becomes one block per row instead of columns squeezed to "fram…"."""

from __future__ import annotations

import re
from typing import Any, List, Tuple

from rich.console import Console
from rich.table import Table
from rich.text import Text

# An unbreakable piece: a backquoted span (a command in a sentence) with what sticks to it, or a run
# of non-blank characters (a word, a URL, a path).
_PIECE = re.compile(r"`[^`\n]*`\S*|\S+")
HANG = 2  # continuation lines are indented this much more than the line they continue


def is_command(plain: str) -> bool:
    """A line that prints a shell command: it is never wrapped."""
    return plain.lstrip().startswith("$ ")


def breaks(plain: str, width: int, hang: int) -> List[Tuple[int, int]]:
    """(start, end) offsets of the lines `plain` is wrapped into: greedy, at blanks only, never
    inside a piece; lines after the first have `hang` columns of indentation in front of them."""
    indent = len(plain) - len(plain.lstrip(" "))
    if len(plain) <= width or is_command(plain):
        return [(0, len(plain))]
    out: List[Tuple[int, int]] = []
    start, end, room = 0, 0, width
    for m in _PIECE.finditer(plain, indent):
        if end > start and m.end() - start > room:
            out.append((start, end))
            start, room = m.start(), width - hang
        end = m.end()
    out.append((start, len(plain)))
    return out


def wrap_plain(line: str, width: int) -> List[str]:
    """One line of plain text, wrapped (see `breaks`)."""
    indent = len(line) - len(line.lstrip(" "))
    hang = indent + HANG
    spans = breaks(line, width, hang)
    return [line[a:b].rstrip() if i == 0 else " " * hang + line[a:b].rstrip() for i, (a, b) in enumerate(spans)]


def wrap_text_block(text: str, width: int) -> str:
    """Every line of `text` wrapped (see `wrap_plain`)."""
    return "\n".join(out for line in text.split("\n") for out in wrap_plain(line, width))


class WidthConsole(Console):
    """A rich Console whose `print` keeps the contract above for markup strings and tables."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if len(objects) == 1 and not (set(kwargs) - {"style", "highlight", "markup", "end"}):
            obj = objects[0]
            if isinstance(obj, Table) and self._too_wide(obj):
                self._stacked(obj)
                return
            if isinstance(obj, (str, Text)) and kwargs.get("markup", True) is not False:
                self._wrapped(obj, **kwargs)
                return
        super().print(*objects, **kwargs)

    def _wrapped(self, obj: "str | Text", **kwargs: Any) -> None:
        text = self.render_str(obj) if isinstance(obj, str) else obj
        if "\n" in text.plain:
            for part in text.split("\n", allow_blank=True):
                self._wrapped(part, **kwargs)
            return
        plain = text.plain
        indent = len(plain) - len(plain.lstrip(" "))
        spans = breaks(plain, self.width, indent + HANG)
        for i, (a, b) in enumerate(spans):
            piece = text[a:b]
            piece.rstrip()
            if i:
                piece = Text.assemble(" " * (indent + HANG), piece)
            super().print(piece, soft_wrap=True, **kwargs)

    def _too_wide(self, table: Table) -> bool:
        """Whether the table cannot show every column's longest word whole (rich would cut them
        to "fram…"); where it can, each column is told its minimum so that rich does not."""
        _top, right, _bottom, left = table.padding
        boxed = table.box is not None
        need = (len(table.columns) - 1 if boxed else 0) + (2 if boxed and table.show_edge else 0)
        mins = []
        for col in table.columns:
            texts = [self.render_str(c) if isinstance(c, str) else c for c in [col.header, *col.cells]]
            plains = [t.plain if isinstance(t, Text) else str(t) for t in texts]
            if col.no_wrap:
                longest = max((len(line) for p in plains for line in p.split("\n")), default=0)
            else:
                longest = max((len(w) for p in plains for w in _PIECE.findall(p)), default=0)
            mins.append(longest)
            need += longest + left + right
        if need > self.width:
            return True
        for col, m in zip(table.columns, mins):
            col.min_width = max(col.min_width or 0, m)
        return False

    def _stacked(self, table: Table) -> None:
        """A table as one block per row: its first cell, then `header: value` for the others."""
        if table.title:
            self._wrapped(Text.from_markup(f"[bold]{table.title}[/bold]") if isinstance(table.title, str)
                          else Text(str(table.title)))
        cols = table.columns
        for r in range(table.row_count):
            cells = [self._cell(c, r) for c in cols]
            if not any(cells):
                continue
            self._wrapped(Text.assemble("  ", cells[0] if cells[0] else Text("-"), style="bold"))
            for col, cell in zip(cols[1:], cells[1:]):
                if cell.plain.strip():
                    self._wrapped(Text.assemble("      ", (f"{col.header}: ", "dim"), cell))

    def _cell(self, col: Any, row: int) -> Text:
        cells = list(col.cells)
        value = cells[row] if row < len(cells) else ""
        text = self.render_str(value) if isinstance(value, str) else value if isinstance(value, Text) \
            else Text(str(value))
        parts = [part for part in text.split("\n") if part.plain.strip()]
        if len(parts) <= 1:
            return parts[0] if parts else Text()
        # a multi-line cell (one reason per line) becomes one line joined by "; "
        joined = Text()
        for part in parts:
            if joined.plain:
                joined.append("; ")
            part.rstrip()
            joined.append_text(part)
        return joined
