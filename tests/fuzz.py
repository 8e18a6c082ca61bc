"""Hypothesis strategies that mutate real captures the way pastes and terminals do."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st


def examples(n: int) -> int:
    """A fuzz test's number of examples under the loaded profile (tests/conftest.py): `n` in dev,
    four times `n` in ci (its max_examples over Hypothesis' default of 100)."""
    return max(1, n * settings.default.max_examples // 100)

PROMPTS = ["user@host:~$ ", "PS C:\\Users\\me> ", "$ ", "root@box:/# ", ">>> "]
ANSI = ["\x1b[0m", "\x1b[1;32m", "\x1b[31m", "\x1b[2K", "\x1b[?25l"]


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    lines = text.split("\n")
    op = draw(st.sampled_from(["truncate", "bytes", "drop", "double", "ansi", "prompt", "crlf", "combo"]))
    ops = [op] if op != "combo" else draw(st.lists(st.sampled_from(
        ["truncate", "bytes", "drop", "double", "ansi", "prompt", "crlf"]), min_size=2, max_size=4))
    for o in ops:
        if o == "truncate" and text:
            cut = draw(st.integers(0, len(text)))
            text = text[:cut]
            lines = text.split("\n")
        elif o == "bytes":
            pos = draw(st.integers(0, len(text)))
            junk = draw(st.text(min_size=1, max_size=20))
            text = text[:pos] + junk + text[pos:]
            lines = text.split("\n")
        elif o == "drop" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            n = draw(st.integers(1, 5))
            del lines[i:i + n]
            text = "\n".join(lines)
        elif o == "double" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif o == "ansi" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = draw(st.sampled_from(ANSI)) + lines[i] + "\x1b[0m"
            text = "\n".join(lines)
        elif o == "prompt":
            text = draw(st.sampled_from(PROMPTS)) + "tool --args\n" + text
            lines = text.split("\n")
        elif o == "crlf":
            text = text.replace("\n", "\r\n")
            lines = text.split("\n")
    return text
