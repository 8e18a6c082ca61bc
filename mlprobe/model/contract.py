"""JSON in and out of the typed stage contracts, in one place.

A contract is a dataclass declared `@contract` (its fields set once, see Record) whose fields are
annotated with plain JSON shapes: `str`, `int`, `float`, `bool`, `Any`, `Optional[X]`,
`Tuple[X, ...]`, `Mapping[str, X]` and other contracts.
`to_json` writes one (tuples become lists, the field order is the key order), `from_json` reads one
and names the field of a document that has the wrong shape (`recommended[2].reasons[0]: expected a
string`), and `json_schema` derives the JSON Schema that `mlprobe schema plan` ships, so the types and
the schema cannot drift apart."""

from __future__ import annotations

import dataclasses
from collections import abc
import sys
import typing
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Tuple, Type, TypeVar, Union

T = TypeVar("T")

# A field declared with `field(default=None, metadata=OPTIONAL_KEY)` is left out of the JSON when it
# is None, the way a document that only sometimes carries the key reads.
OMIT_IF_NONE = "omit_if_none"
OPTIONAL_KEY = {OMIT_IF_NONE: True}
# A field declared with `metadata=NOT_JSON_FIELD` is bookkeeping: never written, read or in the schema.
NOT_JSON = "not_json"
NOT_JSON_FIELD = {NOT_JSON: True}
# A required field declared with `field(metadata=unknown_as(VALUE))` takes VALUE when the lenient reader
# cannot read it (missing, or of the wrong type): its object is kept, with that field unknown, instead of
# being left out of the list it sits in (a GPU whose vendor is damaged is still a GPU).
UNKNOWN_AS = "unknown_as"


def unknown_as(value: Any) -> Dict[str, Any]:
    return {UNKNOWN_AS: value}


# A contract with the class attribute `KEEPS_KEYS = True` writes the keys its sources gave, in their
# order, and nothing else: where "the source wrote null" (it looked and found nothing) and "no source
# wrote the key" are both facts (the scan's runtimes). It declares the field `keys` (NOT_JSON_FIELD).
KEYS_FIELD = "keys"


class Record:
    """Base of the contract types: construction, equality, hash, repr and immutability over the
    dataclass fields, written once here. Declared with `@contract` (below), a contract is a dataclass
    that compiles no function when it is defined; `@dataclass(frozen=True)` compiled six per class
    (__init__, __eq__, __hash__, __repr__, __setattr__, __delattr__), and with some sixty contracts that
    was most of what importing the model cost on every command. A field is set once, by __init__;
    assigning or deleting it afterwards raises dataclasses.FrozenInstanceError, as for a frozen
    dataclass."""

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The fields by position or name, in declaration order; a missing one takes its default. One
        __init__ for every contract (type checkers see each contract's own signature through
        dataclass_transform): a dataclass compiles an __init__ per class when the class is defined,
        three quarters of what defining one costs, and assigns each field through __setattr__."""
        cls = type(self)
        spec = _INITS.get(cls)
        if spec is None:
            spec = _init_spec(cls)
        names, known, defaults, factories = spec
        if kwargs and not kwargs.keys() <= known:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument "
                            f"{sorted(kwargs.keys() - known)[0]!r}")
        nargs = len(args)
        if nargs > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} positional arguments but {nargs} were given")
        d = self.__dict__
        for i, n in enumerate(names):
            if i < nargs:
                if n in kwargs:
                    raise TypeError(f"{cls.__name__}() got multiple values for argument {n!r}")
                d[n] = args[i]
            elif n in kwargs:
                d[n] = kwargs[n]
            elif n in defaults:
                d[n] = defaults[n]
            elif n in factories:
                d[n] = factories[n]()
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: {n!r}")

    def _compared(self) -> Tuple[Any, ...]:
        names = _COMPARED.get(type(self))
        if names is None:
            names = _COMPARED[type(self)] = tuple(
                f.name for f in dataclasses.fields(self) if f.compare)  # type: ignore[arg-type]
        return tuple(getattr(self, n) for n in names)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                          for f in dataclasses.fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{type(self).__qualname__}({shown})"

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__ or name not in self.__dataclass_fields__:  # type: ignore[attr-defined]
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


_COMPARED: Dict[type, Tuple[str, ...]] = {}
_InitSpec = Tuple[Tuple[str, ...], FrozenSet[str], Dict[str, Any], Dict[str, Callable[[], Any]]]
_INITS: Dict[type, _InitSpec] = {}


def _init_spec(cls: type) -> _InitSpec:
    names: List[str] = []
    defaults: Dict[str, Any] = {}
    factories: Dict[str, Callable[[], Any]] = {}
    for f in dataclasses.fields(cls):
        names.append(f.name)
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            factories[f.name] = f.default_factory
    spec = _INITS[cls] = (tuple(names), frozenset(names), defaults, factories)
    return spec

if typing.TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    try:
        from typing import dataclass_transform  # novm: a no-op below
    except ImportError:  # Python < 3.11: only type checkers read it
        def dataclass_transform(**_kw: Any) -> Any:
            return lambda f: f

C = TypeVar("C", bound=type)


@dataclass_transform(frozen_default=True, eq_default=True)
def contract(cls: C) -> C:
    """`@contract class X(Record): ...`: a dataclass whose fields are set once (see Record), made
    without compiling a method of its own."""
    return dataclasses.dataclass(eq=False, repr=False, init=False)(cls)  # type: ignore[return-value]


class ContractError(ValueError):
    """A document that does not have a contract's shape; the message names the field."""


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        module = sys.modules[cls.__module__]
        hints = typing.get_type_hints(cls, vars(module))
        _HINTS[cls] = hints
    return hints


def _fields(cls: type) -> List[Tuple[dataclasses.Field[Any], Any]]:
    hints = _hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls)]


def _optional_of(tp: Any) -> Any:
    """X for Optional[X], else None."""
    if typing.get_origin(tp) is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def to_json(value: Any) -> Any:
    """A contract (or a value inside one) as plain JSON data. A contract inside another that has its
    own `to_json` method writes itself."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if getattr(value, "KEEPS_KEYS", False):
            return {k: _value_json(getattr(value, k)) for k in getattr(value, KEYS_FIELD)}
        return {f.name: _value_json(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get(OMIT_IF_NONE) and getattr(value, f.name) is None)
                and not f.metadata.get(NOT_JSON)}
    return _value_json(value)


def _value_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_json", None)
        return own() if own is not None else to_json(value)
    if isinstance(value, (list, tuple)):
        return [_value_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _value_json(v) for k, v in value.items()}
    return value


def _where(path: str) -> str:
    return path or "the document"


class _Unreadable(ContractError):
    """A value of the wrong type met by the lenient reader: the field (or list item) it sits in is
    unknown."""


def _bad(lenient: bool, message: str) -> ContractError:
    return _Unreadable(message) if lenient else ContractError(message)


def _read(tp: Any, value: Any, path: str, lenient: bool = False) -> Any:
    if tp is Any:
        return value
    inner = _optional_of(tp)
    if inner is not None:
        return None if value is None else _read(inner, value, path, lenient)
    origin = typing.get_origin(tp)
    if origin is tuple:
        (item,) = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if not isinstance(value, (list, tuple) if lenient else list):
            raise _bad(lenient, f"{_where(path)}: expected a list")
        if not lenient:
            return tuple(_read(item, v, f"{path}[{i}]") for i, v in enumerate(value))
        items = []
        for i, v in enumerate(value):
            try:
                items.append(_read(item, v, f"{path}[{i}]", True))
            except _Unreadable:
                continue  # lenient: an item of the wrong shape is left out
        return tuple(items)
    if origin in (abc.Mapping, dict) or tp is dict:
        args = typing.get_args(tp)
        item = args[1] if len(args) == 2 else Any
        if not isinstance(value, Mapping):
            raise _bad(lenient, f"{_where(path)}: expected an object")
        out = {}
        for k, v in value.items():
            try:
                out[str(k)] = _read(item, v, f"{path}.{k}" if path else str(k), lenient)
            except _Unreadable:
                continue
        return out
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        own = getattr(tp, "from_json", None)
        if lenient and not isinstance(value, Mapping):
            raise _Unreadable(f"{_where(path)}: expected an object")
        if lenient and own is not None and getattr(tp, "OWN_JSON", False):
            try:  # a document shape of its own (one of two shapes): read as it reads itself
                return own(value)
            except (ContractError, TypeError, ValueError):
                raise _Unreadable(f"{_where(path)}: unreadable") from None
        if own is None or lenient:
            return from_json(tp, value, path, lenient)
        try:
            return own(value)
        except ContractError as exc:
            raise ContractError(f"{_where(path)}: {exc}") from None
    if tp is bool:
        if not isinstance(value, bool):
            raise _bad(lenient, f"{_where(path)}: expected true or false")
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _bad(lenient, f"{_where(path)}: expected an integer")
        return value
    if tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _bad(lenient, f"{_where(path)}: expected a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise _bad(lenient, f"{_where(path)}: expected a string")
        return value
    raise TypeError(f"no JSON reading for {tp!r}")  # a contract declared with an unsupported type


def from_json(cls: Type[T], doc: Any, path: str = "", lenient: bool = False) -> T:
    """A contract from JSON data. A missing field takes its default (a field without one is
    required); unknown keys are ignored (a newer minor version may add some).

    `lenient` reads a document nobody checked (a report from another version, a hand-written one):
    a value of the wrong type is unknown instead of an error: its field takes its default (None for
    an optional one), a list item or map entry of the wrong shape is left out, and only a required
    field that cannot be read makes its object unreadable (left out of the list it sits in), unless the
    field names the value it takes when unknown (`unknown_as`)."""
    if not isinstance(doc, Mapping):
        if not lenient:
            raise ContractError(f"{_where(path)}: expected an object")
        doc = {}
    values: Dict[str, Any] = {}
    for f, tp in _fields(cls):
        sub = f"{path}.{f.name}" if path else f.name
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.metadata.get(NOT_JSON):
            continue
        if f.name not in doc:
            if required and lenient and UNKNOWN_AS in f.metadata:
                values[f.name] = f.metadata[UNKNOWN_AS]
            elif required:
                raise _bad(lenient, f"{sub}: missing")
            continue
        if not lenient:
            values[f.name] = _read(tp, doc[f.name], sub)
            continue
        try:
            values[f.name] = _read(tp, doc[f.name], sub, True)
        except _Unreadable:
            if required and UNKNOWN_AS in f.metadata:
                values[f.name] = f.metadata[UNKNOWN_AS]
            elif required:
                raise
    if getattr(cls, "KEEPS_KEYS", False):
        values[KEYS_FIELD] = tuple(k for k in doc if k in values)
    return cls(**values)


def _schema(tp: Any, defs: Dict[str, Any]) -> Dict[str, Any]:
    if tp is Any:
        return {}
    inner = _optional_of(tp)
    if inner is not None:
        s = _schema(inner, defs)
        if "type" in s and isinstance(s["type"], str):
            return dict(s, type=[s["type"], "null"])
        return {"anyOf": [s, {"type": "null"}]}
    origin = typing.get_origin(tp)
    if origin is tuple:
        (item,) = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return {"type": "array", "items": _schema(item, defs)}
    if origin in (abc.Mapping, dict) or tp is dict:
        args = typing.get_args(tp)
        return {"type": "object", "additionalProperties": _schema(args[1] if len(args) == 2 else Any, defs)}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder against recursion
            defs[name] = _object_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"no JSON Schema for {tp!r}")


def _object_schema(cls: type, defs: Dict[str, Any]) -> Dict[str, Any]:
    props: Dict[str, Any] = {}
    required: List[str] = []
    for f, tp in _fields(cls):
        if f.metadata.get(NOT_JSON):
            continue
        props[f.name] = _schema(tp, defs)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
    if doc.startswith(f"{cls.__name__}("):  # the signature dataclasses write when there is no docstring
        doc = ""
    return {"type": "object", **({"description": doc} if doc else {}), "required": required,
            "properties": props}


def json_schema(cls: type, title: str) -> Dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a contract, derived from its types."""
    defs: Dict[str, Any] = {}
    top = _object_schema(cls, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **top,
            **({"$defs": defs} if defs else {})}


__all__ = ["ContractError", "KEYS_FIELD", "NOT_JSON", "NOT_JSON_FIELD", "OMIT_IF_NONE", "OPTIONAL_KEY", "UNKNOWN_AS",
           "from_json", "json_schema", "to_json", "unknown_as"]
