"""The Export as pixi takes it (fields from pixi's manifest reference, knowledge/exports.json PIXI-MAN,
PIXI-SYS, PIXI-PYPI): `[system-requirements]` with the machine's CUDA (the driver's major.minor),
libc and macOS, `[pypi-dependencies]` with each package pinned to its index (pixi's per-package
`index`), `[activation.env]` for the recipe's settings, and the machine's platform in the
workspace's `platforms`. Into a pixi.toml, or under `[tool.pixi]` of a pyproject.toml."""

from __future__ import annotations

from typing import Any, List

from packaging.requirements import Requirement

from ..errors import StageError
from .decide import Export


def _spec(requirement: str) -> str:
    s = str(Requirement(requirement).specifier)
    return s or "*"


def _pixi_root(doc: Any, pyproject: bool) -> Any:
    import tomlkit

    if not pyproject:
        return doc
    tool = doc.setdefault("tool", tomlkit.table(is_super_table=True))
    return tool.setdefault("pixi", tomlkit.table(is_super_table=True))


def apply(doc: Any, exp: Export, pyproject: bool = False, force: bool = False, where: str = "pixi.toml") -> List[str]:
    import tomlkit

    changes: List[str] = []
    root = _pixi_root(doc, pyproject)
    m = exp.machine
    ws_key = "workspace" if "workspace" in root or "project" not in root or pyproject else "project"
    ws = root.setdefault(ws_key, tomlkit.table())
    if "channels" not in ws:
        ws.add("channels", tomlkit.array('["conda-forge"]'))
        changes.append("channels: conda-forge")
    platforms = ws.get("platforms")
    if m.conda_subdir:
        if platforms is None:
            ws.add("platforms", tomlkit.array(f'["{m.conda_subdir}"]'))
            changes.append(f"platforms: {m.conda_subdir}")
        elif m.conda_subdir not in [str(p) if isinstance(p, str) else str(p.get("platform", "")) for p in platforms]:
            platforms.append(m.conda_subdir)
            changes.append(f"added {m.conda_subdir} to platforms")
    req = root.setdefault("system-requirements", tomlkit.table())
    wanted: List[Any] = []
    if m.cuda:
        wanted.append(("cuda", m.cuda))
    if m.glibc:
        libc = tomlkit.inline_table()
        libc.update({"family": "glibc", "version": m.glibc})
        wanted.append(("libc", libc))
    if m.macos:
        wanted.append(("macos", m.macos))
    for key, value in wanted:
        have = req.get(key)
        plain = have.unwrap() if hasattr(have, "unwrap") else have
        new = value.unwrap() if hasattr(value, "unwrap") else value
        if plain == new:
            continue
        if have is not None and not force:
            raise StageError(f"{where}: system-requirements.{key} is already {plain!r}",
                             why=f"the captured machine has {new!r}",
                             next_step="remove it or pass --force; nothing was changed", ref="E413", kind="usage")
        req[key] = value
        changes.append(f"system-requirements.{key} = {new!r}")
    if m.python:
        deps = root.setdefault("dependencies", tomlkit.table())
        if "python" not in deps:
            deps.add("python", f"{m.python}.*")
            changes.append(f"python = {m.python}.*")
    # the PyPI packages, each from its index; a platform-specific table where the workspace also
    # lists platforms the index does not serve
    listed = [str(p) if isinstance(p, str) else str(p.get("platform", "")) for p in (ws.get("platforms") or [])]
    for pin in exp.pins:
        use = exp.index(pin.index)
        entry = tomlkit.inline_table()
        entry.add("version", _spec(pin.requirement))
        if use is not None:
            entry.add("index", use.url)
        gated = use is not None and use.marker is not None and any(
            not p.startswith({"linux": "linux", "win32": "win", "darwin": "osx"}.get(m.sys_platform or "", "?"))
            for p in listed)
        if gated and m.conda_subdir:
            target = root.setdefault("target", tomlkit.table(is_super_table=True))
            table = target.setdefault(m.conda_subdir, tomlkit.table(is_super_table=True)) \
                .setdefault("pypi-dependencies", tomlkit.table())
        else:
            table = root.setdefault("pypi-dependencies", tomlkit.table())
        name = Requirement(pin.requirement).name
        have = table.get(name)
        plain = have.unwrap() if hasattr(have, "unwrap") else have
        if plain == entry.unwrap():
            continue
        if have is not None and isinstance(plain, dict) and plain.get("index") != entry.get("index") and not force:
            raise StageError(f"{where}: {name} is already pinned to {plain.get('index') or 'the default index'}",
                             why=f"mlprobe chose {entry.get('index') or 'the default index'}",
                             next_step="remove that entry or pass --force; nothing was changed", ref="E413",
                             kind="usage")
        table[name] = entry
        changes.append(f"{name} = {entry.as_string()}")
    if exp.env:
        act = root.setdefault("activation", tomlkit.table())
        env = act.setdefault("env", tomlkit.table())
        for k, v in exp.env.items():
            if env.get(k) != v:
                env[k] = v
                changes.append(f"activation.env.{k} = {v!r}")
    return changes


def fragment(exp: Export) -> str:
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"mlprobe export --to pixi: {exp.recipe} for {exp.machine.description}"))
    doc.add(tomlkit.comment("[system-requirements]: pixi's manifest reference; newer pixi also reads it as "
                            "workspace.platforms = [{ platform = ..., cuda = ... }]"))
    apply(doc, exp)
    return str(tomlkit.dumps(doc))
