"""Many machines' Exports as one, for one project file that every node of a fleet syncs: each package
pinned to the index its nodes' build comes from, gated by the environment markers that tell the nodes
apart (`sys_platform`, and `platform_machine` where one platform holds nodes that need different
builds). Markers see the platform and the Python, never the GPU: where two nodes of the same platform
and CPU architecture need different builds (a CUDA node beside a CPU-only login node, or beside a ROCm
node), no marker can tell them apart, and `combine` refuses with both nodes named. Pure: Exports in,
one Export out; the uv writer renders it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Set, Tuple

from ..errors import StageError
from .decide import Export, IndexUse, Machine, Pin

Key = Tuple[str, str]  # (sys_platform, platform_machine)


@dataclass(frozen=True)
class Node:
    name: str
    export: Export


def _key(node: Node) -> Key:
    m = node.export.machine
    if not m.sys_platform or not m.platform_machine:
        raise StageError(f"the report of {node.name} does not say its platform and CPU architecture",
                         why="a fleet export gates each build with the platform markers of the nodes that need it",
                         next_step="make that node's report again with `mlprobe report -o FILE.json`, or leave it out",
                         ref="E417", kind="usage")
    return m.sys_platform, m.platform_machine


def _marker(keys: Set[Key], rivals: Set[Key]) -> str:
    """The marker true on `keys` and false on `rivals` (the nodes that take the package elsewhere):
    by sys_platform alone where no rival shares it, else with the CPU architecture too."""
    parts = []
    rival_platforms = {p for p, _ in rivals}
    for plat in sorted({p for p, _ in keys}):
        if plat not in rival_platforms:
            parts.append(f"sys_platform == '{plat}'")
        else:
            parts += [f"sys_platform == '{plat}' and platform_machine == '{mach}'"
                      for p, mach in sorted(keys) if p == plat]
    if len(parts) == 1:
        return parts[0]
    return " or ".join(f"({p})" if " and " in p else p for p in parts)


def _refuse(package: str, a: Tuple[str, str], b: Tuple[str, str], key: Key) -> StageError:
    (na, wa), (nb, wb) = a, b
    return StageError(
        f"{na} and {nb} are both {key[0]} {key[1]} but need different {package}: {wa} and {wb}",
        why="uv's markers see the platform and the Python, not the GPU: one pyproject.toml cannot give these "
            "two nodes different builds of the same package",
        next_step="export each build into a project of its own (`mlprobe export --to uv --replay "
                  "A-REPORT.json --into …`), or give each build an extra and declare them as conflicting "
                  "(uv's `[tool.uv] conflicts`, as uv's PyTorch guide shows)",
        ref="E417", kind="usage")


def combine(nodes: Sequence[Node]) -> Export:
    """One Export for every node; E417 where markers cannot tell two nodes' builds apart."""
    if not nodes:
        raise StageError("the fleet has no reports to export", why="no report file was read",
                         next_step="pass the report files or the folder `mlprobe fleet merge` reads", ref="E417",
                         kind="usage")
    indexes: Dict[str, IndexUse] = {}  # URL -> the first IndexUse seen for it
    # package -> key -> (node, index URL or "", requirement)
    choice: Dict[str, Dict[Key, Tuple[str, str, str]]] = {}
    order: List[str] = []
    for node in nodes:
        key = _key(node)
        for pin in node.export.pins:
            use = node.export.index(pin.index)
            url = use.url if use is not None else ""
            if use is not None:
                indexes.setdefault(use.url, use)
            where = f"{pin.requirement} from {url or 'the default index'}"
            seen = choice.setdefault(pin.name, {})
            if pin.name not in order:
                order.append(pin.name)
            if key in seen and (seen[key][1], seen[key][2]) != (url, pin.requirement):
                raise _refuse(pin.name, (seen[key][0], f"{seen[key][2]} from {seen[key][1] or 'the default index'}"),
                              (node.name, where), key)
            seen.setdefault(key, (node.name, url, pin.requirement))
    # a package some nodes lack: those nodes take it from the default index if at all (no source)
    pins: List[Pin] = []
    for name in order:
        by_key = choice[name]
        every = set(by_key)
        by_req: Dict[str, Set[Key]] = {}
        for key, (_n, _u, req) in by_key.items():
            by_req.setdefault(req, set()).add(key)
        by_url: Dict[str, Set[Key]] = {}
        for key, (_n, url, _r) in by_key.items():
            by_url.setdefault(url, set()).add(key)
        one_req = len(by_req) == 1
        for req, req_keys in sorted(by_req.items()):
            urls = sorted({by_key[k][1] for k in req_keys})
            for url in urls:
                keys = {k for k in req_keys if by_key[k][1] == url}
                use = indexes.get(url)
                source_marker = _marker(by_url[url], every - by_url[url]) if use is not None else None
                pins.append(Pin(name=name, requirement=req, index=use.name if use else None,
                                marker=None if one_req else _marker(keys, every - keys),
                                source_marker=source_marker,
                                why=f"{len(keys)} platform(s) of the fleet take {req}"))
    envs = {tuple(sorted(n.export.env.items())) for n in nodes}
    notes = [f"{len(nodes)} node build(s): " + "; ".join(
        sorted({f"{_key(n)[0]} {_key(n)[1]}: {n.export.recipe}" for n in nodes}))]
    env: Dict[str, str] = {}
    if len(envs) == 1:
        env = dict(next(iter(envs)))
    else:
        notes.append("the builds' settings differ, so none went into .env: run `mlprobe install --recipe R "
                     "--venv .venv --settings-only` on each node with its own recipe")
    recipes = sorted({n.export.recipe for n in nodes})
    first = nodes[0].export
    machine = Machine(description=f"a fleet of {len(nodes)} build(s)", system=None, sys_platform=None,
                      platform_machine=None, conda_subdir=None, python=first.machine.python, cuda=None,
                      glibc=None, macos=None, linux=None, microarchitecture=None)
    return Export(recipe=" + ".join(recipes), title="fleet", framework=first.framework, backend=None,
                  machine=machine, indexes=tuple(indexes.values()), pins=tuple(pins), env=env,
                  notes=tuple(notes), sources=tuple(sorted({s for n in nodes for s in n.export.sources})))


def identical_builds(nodes: Sequence[Node]) -> List[Node]:
    """One node per distinct (platform, build): many nodes of one kind export as one."""
    seen: Set[Tuple[object, ...]] = set()
    out: List[Node] = []
    for n in nodes:
        urls = [getattr(n.export.index(p.index), "url", "") for p in n.export.pins]
        sig = (n.export.machine.sys_platform, n.export.machine.platform_machine, n.export.recipe,
               tuple((p.name, p.requirement, u) for p, u in zip(n.export.pins, urls)),
               tuple(sorted(n.export.env.items())))
        if sig not in seen:
            seen.add(sig)
            out.append(n)
    return out


__all__ = ["Node", "combine", "identical_builds"]

