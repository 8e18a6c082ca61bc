"""The shape of a JSON value, for the edges where mlprobe reads or writes a document (a report file,
a journal, a child's event line, a `to_dict()` for `--json`). Inside, stages hand each other typed
contracts (model/); a function that takes or gives `JsonObject` is one that reads or writes JSON.

Unlike `Dict[str, Any]`, mypy checks what goes into a `JsonObject` (no set, no dataclass, no path
object slips into a document) and makes a reader narrow what it takes out (`isinstance`)."""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Union

JsonValue = Union[None, bool, int, float, str, List["JsonValue"], Dict[str, "JsonValue"]]
JsonObject = Dict[str, JsonValue]
# What a writer may be given: read-only views of the same shapes (a tuple of strings, a Mapping).
JsonIn = Union[None, bool, int, float, str, Sequence["JsonIn"], Mapping[str, "JsonIn"]]
