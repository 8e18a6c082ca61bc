"""Typed values flow between the stages; JSON exists only at the edges. In plan, install, verify,
report, fleet and pipeline at most a few functions take or give `Dict`/`Mapping[str, Any]` (each one
reads or writes a document: a TOML or JSON file). A JSON edge is typed with model/jsontypes.py's
JsonObject instead, which mypy checks. The count follows type aliases of such a mapping too, so an
alias does not hide one."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set, Tuple

PKG = Path(__file__).resolve().parent.parent / "mlprobe"
TARGETS = ["plan", "install", "verify", "report", "fleet", "pipeline.py"]
MAPS = {"Dict", "dict", "Mapping", "MutableMapping"}
LIMIT = 40


def _name(n: ast.AST) -> str:
    return n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""


def _parsed(text: str) -> List[ast.AST]:
    try:
        return list(ast.walk(ast.parse(text, mode="eval")))
    except SyntaxError:
        return []


def _mentions(node: ast.AST, aliases: Set[str]) -> bool:
    """A str-to-Any mapping, or a name of an alias of one, anywhere in an annotation (string
    annotations included)."""
    for sub in ast.walk(node):
        subs = [sub] + (_parsed(sub.value) if isinstance(sub, ast.Constant) and isinstance(sub.value, str) else [])
        for s in subs:
            if isinstance(s, ast.Name) and s.id in aliases:
                return True
            if isinstance(s, ast.Subscript) and _name(s.value) in MAPS and isinstance(s.slice, ast.Tuple) \
                    and len(s.slice.elts) == 2 and _name(s.slice.elts[0]) == "str" and _name(s.slice.elts[1]) == "Any":
                return True
    return False


def untyped_signatures() -> List[Tuple[str, int, str]]:
    trees: Dict[Path, ast.Module] = {p: ast.parse(p.read_text(encoding="utf-8")) for p in PKG.rglob("*.py")}
    aliases: Set[str] = set()
    changed = True
    while changed:  # aliases of aliases, across the package
        changed = False
        for tree in trees.values():
            for st in tree.body:
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                        and not isinstance(st.value, (ast.Call, ast.Dict, ast.DictComp, ast.List)) \
                        and st.targets[0].id not in aliases and _mentions(st.value, aliases):
                    aliases.add(st.targets[0].id)
                    changed = True
    files = [f for t in TARGETS for f in ([PKG / t] if (PKG / t).is_file() else sorted((PKG / t).rglob("*.py")))]
    hits = []
    for path in files:
        for fn in ast.walk(trees[path]):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = fn.args
                anns = [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                        if x is not None and x.annotation is not None] + ([fn.returns] if fn.returns else [])
                if any(_mentions(n, aliases) for n in anns):
                    hits.append((str(path.relative_to(PKG.parent)), fn.lineno, fn.name))
    return hits


def test_at_most_a_few_signatures_hand_a_mapping_of_any_between_stages() -> None:
    hits = untyped_signatures()
    assert len(hits) <= LIMIT, "\n".join(f"{f}:{n} {name}" for f, n, name in hits)


def test_the_count_sees_a_mapping_of_any_and_its_aliases() -> None:
    tree = ast.parse("X = Dict[str, Any]\nY = Optional[X]\ndef f(a: 'Y') -> int: ...\ndef g(a: Dict[str, int]) -> None: ...")
    aliases: Set[str] = set()
    for _ in range(2):
        for st in tree.body:
            if isinstance(st, ast.Assign) and _mentions(st.value, aliases):
                aliases.add(st.targets[0].id)  # type: ignore[attr-defined]
    assert aliases == {"X", "Y"}
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert [_mentions(f.args.args[0].annotation, aliases) for f in fns] == [True, False]  # type: ignore[arg-type]
