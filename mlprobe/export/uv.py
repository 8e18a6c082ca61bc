"""The Export as uv takes it, in the project's own pyproject.toml: one `[[tool.uv.index]]` per index
(named, `explicit = true`), `[tool.uv.sources]` pinning each package to it (gated with a marker
where the index does not serve every platform, as uv's PyTorch guide does), and each such package
in `project.dependencies`, since sources apply to direct dependencies only. An existing file keeps
everything it had; an entry already there as mlprobe would write it is left alone (a second export
changes nothing), a package pinned to another source is refused unless forced."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..errors import StageError
from .decide import Export, Pin


def _source_entries(exp: Export, pins: List[Pin]) -> List[Dict[str, str]]:
    """The source entries of one package: one per pin of it that names an index (a fleet's package
    may come from several indexes, each for its nodes' marker)."""
    out = []
    for pin in pins:
        use = exp.index(pin.index)
        if use is None:
            continue
        entry = {"index": use.name}
        marker = pin.source_marker or use.marker
        if marker:
            entry["marker"] = marker
        if entry not in out:
            out.append(entry)
    return out


def _by_name(pins: Tuple[Pin, ...]) -> Dict[str, List[Pin]]:
    out: Dict[str, List[Pin]] = {}
    for p in pins:
        out.setdefault(p.name, []).append(p)
    return out


def _plain(value: Any) -> Any:
    """A tomlkit value as plain Python (lists, dicts, strings)."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def _index_table(doc: Any) -> Any:
    import tomlkit

    tool = doc.setdefault("tool", tomlkit.table(is_super_table=True))
    uv = tool.setdefault("uv", tomlkit.table())
    return uv


def apply(doc: Any, exp: Export, force: bool = False, where: str = "pyproject.toml") -> List[str]:
    """Edit tomlkit document `doc` in place; returns what changed, in words (empty: nothing to do)."""
    import tomlkit

    changes: List[str] = []
    if "project" not in doc:
        raise StageError(f"{where} has no [project] table", why="uv's sources apply to the project's dependencies",
                         next_step="make it a project first (`uv init`, or add [project] with name and version)",
                         ref="E416", kind="usage")
    uv = _index_table(doc)
    # 1. the indexes: reuse an entry with the same URL (whatever its name), else add one
    names: Dict[str, str] = {}
    existing = uv.get("index")
    entries = list(existing) if existing is not None else []
    for use in exp.indexes:
        if not any(p.index == use.name for p in exp.pins):
            continue
        same_url = next((e for e in entries if str(e.get("url", "")).rstrip("/") == use.url.rstrip("/")), None)
        if same_url is not None:
            names[use.name] = str(same_url.get("name") or use.name)
            if not _plain(same_url.get("explicit", False)):
                if not force:
                    raise _conflict(where, f"the index {names[use.name]} ({use.url}) is not explicit",
                                    "without `explicit = true` uv takes any package from it, other builds too")
                same_url["explicit"] = True
                changes.append(f"made the index {names[use.name]} explicit")
            continue
        same_name = next((e for e in entries if str(e.get("name", "")) == use.name), None)
        if same_name is not None:
            if not force:
                raise _conflict(where, f"an index named {use.name} already points to {same_name.get('url')}",
                                f"mlprobe's choice is {use.url}")
            same_name["url"] = use.url
            same_name["explicit"] = True
            names[use.name] = use.name
            changes.append(f"pointed the index {use.name} to {use.url}")
            continue
        table = tomlkit.table()
        table.add("name", use.name)
        table.add("url", use.url)
        table.add("explicit", True)
        if existing is None:
            existing = tomlkit.aot()
            uv.add("index", existing)
        existing.append(table)
        entries.append(table)
        names[use.name] = use.name
        changes.append(f"added the index {use.name} ({use.url})")
    # 2. the sources
    sources = uv.get("sources")
    for name, same in _by_name(exp.pins).items():
        pin = same[0]
        if all(p.index is None for p in same):
            continue
        want = [{**e, "index": names.get(e["index"], e["index"])} for e in _source_entries(exp, same)]
        if sources is None:
            sources = tomlkit.table()
            uv.add("sources", sources)
        have_key = next((k for k in sources if canonicalize_name(str(k)) == pin.name), None)
        if have_key is not None:
            have = _plain(sources[have_key])
            have_list = have if isinstance(have, list) else [have]
            if have_list == want:
                continue
            if not force:
                raise _conflict(where, f"{have_key} is already pinned to {_describe(have_list)}",
                                f"mlprobe chose {_describe(want)}")
            del sources[have_key]
            changes.append(f"replaced the source of {have_key} ({_describe(have_list)})")
        arr = tomlkit.array()
        for e in want:
            it = tomlkit.inline_table()
            it.update(e)
            arr.append(it)
        sources.add(have_key or pin.name, arr)
        changes.append(f"pinned {pin.name} to {_describe(want)}")
    # 3. the dependencies
    project = doc["project"]
    deps = project.get("dependencies")
    if deps is None:
        deps = tomlkit.array()
        deps.multiline(True)
        project.add("dependencies", deps)
    for name, same in _by_name(exp.pins).items():
        texts = list(dict.fromkeys(p.dependency for p in same))
        found = _find_dependencies(deps, name)
        if len(found) == len(texts) and all(any(_same_requirement(old, t) for _, old in found) for t in texts):
            continue
        if not found:
            for text in texts:
                deps.append(text)
                changes.append(f"added {text} to project.dependencies")
            continue
        for i, old in reversed(found[1:]):
            del deps[i]
        i, old = found[0]
        deps[i] = texts[0]
        for text in texts[1:]:
            deps.insert(i + 1, text)
            i += 1
        changes.append(f"replaced {', '.join(o for _, o in found)} with {', '.join(texts)} in project.dependencies")
    return changes


def _describe(entries: List[Any]) -> str:
    parts = []
    for e in entries:
        if isinstance(e, dict):
            src = e.get("index") or e.get("git") or e.get("path") or e.get("url") or e.get("workspace")
            kind = "index" if "index" in e else next(iter(e), "source")
            parts.append(f"{kind} {src}" + (f" where {e['marker']}" if e.get("marker") else ""))
        else:
            parts.append(str(e))
    return "; ".join(parts) or "nothing"


def _conflict(where: str, what: str, why: str) -> StageError:
    return StageError(f"{where}: {what}", why=why,
                      next_step="remove that entry or pass --force to replace it with mlprobe's choice; nothing "
                                "was changed", ref="E413", kind="usage")


def _find_dependencies(deps: Any, name: str) -> List[Tuple[int, str]]:
    out = []
    for i, item in enumerate(deps):
        try:
            if canonicalize_name(Requirement(str(item)).name) == name:
                out.append((i, str(item)))
        except InvalidRequirement:
            continue
    return out


def _same_requirement(a: str, b: str) -> bool:
    try:
        ra, rb = Requirement(a), Requirement(b)
    except InvalidRequirement:
        return a == b
    return (canonicalize_name(ra.name), ra.extras, str(ra.specifier), str(ra.marker or "")) == \
        (canonicalize_name(rb.name), rb.extras, str(rb.specifier), str(rb.marker or ""))


def fragment(exp: Export) -> str:
    """What `--to uv` prints without --into: the tables to add to a pyproject.toml."""
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"mlprobe export --to uv: {exp.recipe} for {exp.machine.description}"))
    project = tomlkit.table()
    project.add("dependencies", tomlkit.array())
    doc.add("project", project)
    apply(doc, exp)
    return str(tomlkit.dumps(doc))


def dotenv_text(old: Optional[str], env: Dict[str, str]) -> str:
    """A .env with `env` set: the user's own lines kept, mlprobe's keys replaced where they were."""
    import shlex

    lines = (old or "").splitlines()
    done = set()
    out: List[str] = []
    for line in lines:
        key = line.split("=", 1)[0].strip().removeprefix("export ").strip() if "=" in line else None
        if key in env and not line.lstrip().startswith("#"):
            out.append(f"{key}={shlex.quote(env[key])}")
            done.add(key)
        else:
            out.append(line)
    for k, v in env.items():
        if k not in done:
            out.append(f"{k}={shlex.quote(v)}")
    return "\n".join(out) + "\n"
