"""A plan's recommendation turned into an InstallPlan: the packages, where they come from, the env
vars, files and shims, and the steps a person (or --apply) carries out.

A recommendation is a dict from `mlprobe plan` (`make_plan(...)["recommended"][i]`) or a JSON file
given with --recipe-file. Fields read (all optional but `packages`):
  recipe / id, title, framework, backend, device, index (a suffix like "cpu", "cu126", or a URL),
  index_url, extra_index_urls, packages, pip_args, env, config_files [{path, content}],
  steps [{"shim": "plaidml-collections"}, {"command": "..."}], commands, imports, python, warnings.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import EXIT_UNAVAILABLE, EXIT_USAGE, MlprobeError
from ..model.vocabulary import vocabulary
from ..urls import check_file_url_exists, check_url
from .backends import Sources, default_index_url



@dataclass
class InstallOptions:
    framework: str = "any"
    recipe: Optional[str] = None
    python: Optional[str] = None
    index_url: Optional[str] = None
    extra_index_urls: Tuple[str, ...] = ()
    find_links: Tuple[str, ...] = ()
    no_index: bool = False
    use_pip_config: bool = False
    apply: bool = False
    venv: Optional[Path] = None
    system: bool = False
    installer: str = "auto"  # auto | pip | uv
    with_pip: bool = True
    verify: bool = True
    log: Optional[Path] = None
    timeout_s: float = 3600.0
    check_timeout_s: float = 6.0


@dataclass
class Step:
    kind: str  # venv | install | env | file | shim | check | verify | note
    text: str
    command: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class InstallPlan:
    recipe: str
    title: str
    framework: Optional[str]
    backend: Optional[str]
    device: Optional[str]
    packages: List[str]
    recipe_index_url: Optional[str]
    recipe_extra_index_urls: List[str]
    variant_label: Optional[str]
    sources: Sources
    env: Dict[str, str] = field(default_factory=dict)
    config_files: List[Dict[str, str]] = field(default_factory=list)
    shims: List[str] = field(default_factory=list)
    commands: List[str] = field(default_factory=list)
    imports: List[str] = field(default_factory=list)
    python_spec: Optional[str] = None
    verify_framework: Optional[str] = None
    pip_args: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["sources"] = self.sources.to_dict()
        return d


def _as_list(v: Any) -> List[Any]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


def _package_specs(rec: Dict[str, Any]) -> List[str]:
    out: List[str] = []
    for p in _as_list(rec.get("packages")):
        if isinstance(p, str) and p.strip():
            out.append(p.strip())
        elif isinstance(p, dict):
            spec = p.get("requirement") or p.get("spec")
            if not spec and p.get("name"):
                spec = str(p["name"]) + (f"=={p['version']}" if p.get("version") else "")
            if spec:
                out.append(str(spec))
    return out


def _urls_from_commands(commands: Sequence[str]) -> Tuple[Optional[str], List[str]]:
    """--index-url / --extra-index-url named in the recipe's pip commands."""
    index, extra = None, []
    for c in commands:
        try:
            words = shlex.split(c)
        except ValueError:
            continue
        for i, w in enumerate(words):
            for opt in ("--index-url", "--extra-index-url", "-i"):
                val = None
                if w == opt and i + 1 < len(words):
                    val = words[i + 1]
                elif w.startswith(opt + "="):
                    val = w.split("=", 1)[1]
                if val:
                    if opt == "--extra-index-url":
                        extra.append(val)
                    else:
                        index = index or val
    return index, extra


def _is_url(u: str) -> bool:
    return "://" in u and "<" not in u and " " not in u


def _label_of(index: Optional[str], url: Optional[str]) -> Optional[str]:
    if index and "://" not in index:
        return index.strip().strip("/") or None
    src = url or index
    if src:
        tail = src.rstrip("/").rsplit("/", 1)[-1]
        if tail and tail not in ("simple", "whl"):
            return tail
    return None


def recipe_id(rec: Dict[str, Any]) -> str:
    return str(rec.get("recipe") or rec.get("id") or rec.get("name") or "recipe")


def pick_recommendation(plan: Dict[str, Any], recipe: Optional[str]) -> Dict[str, Any]:
    """The first recommended entry, or the one named --recipe (also among alternatives)."""
    recs = [r for r in _as_list(plan.get("recommended")) if isinstance(r, dict)]
    if recipe:
        pool = recs + [r for key in ("alternatives", "ranked", "candidates")
                       for r in _as_list(plan.get(key)) if isinstance(r, dict)]
        for r in pool:
            if recipe_id(r) == recipe:
                return r
        rejected = [r for r in _as_list(plan.get("rejected"))
                    if isinstance(r, dict) and recipe_id(r) == recipe]
        if rejected:
            why = rejected[0].get("reasons") or rejected[0].get("why") or rejected[0].get("reason")
            raise MlprobeError(
                f"recipe {recipe} does not fit this machine",
                why="; ".join(map(str, _as_list(why))) or "the plan rejected it",
                next_step="`mlprobe plan` lists the recipes that fit", ref="E513", exit_code=EXIT_UNAVAILABLE)
        names = ", ".join(recipe_id(r) for r in pool) or "none"
        raise MlprobeError(f"no recipe {recipe} in the plan", why=f"the plan has: {names}",
                           next_step="`mlprobe plan` lists the recipes; pass one of them with --recipe",
                           ref="E513", exit_code=EXIT_USAGE)
    if not recs:
        raise MlprobeError("no recipe fits this machine for that framework",
                           why="the plan recommends nothing",
                           next_step="`mlprobe plan` says why each recipe was rejected; try --framework any",
                           ref="E513", exit_code=EXIT_UNAVAILABLE)
    return recs[0]


def _checked_sources(opts: InstallOptions) -> Tuple[Optional[str], Tuple[str, ...], Tuple[str, ...]]:
    """--index-url, --extra-index-url and --find-links, each checked (E517 on a bad one)."""
    index = check_url(opts.index_url, "--index-url") if opts.index_url is not None else None
    extra = tuple(check_url(u, "--extra-index-url") for u in opts.extra_index_urls)
    for u in (index, *extra):
        if u:
            check_file_url_exists(u, "--index-url" if u == index else "--extra-index-url")
    links: List[str] = []
    for d in opts.find_links:
        if "://" in d:
            links.append(check_url(d, "--find-links"))
            check_file_url_exists(links[-1], "--find-links")
        elif not os.path.isdir(d):
            raise MlprobeError(f"--find-links {d}: no such folder",
                               why="--find-links takes a folder of wheels (or the URL of a page of links)",
                               next_step="check the path", ref="E517", exit_code=EXIT_USAGE)
        else:
            links.append(d)
    return index, extra, tuple(links)


def choose_sources(opts: InstallOptions, recipe_url: Optional[str], recipe_extra: List[str]) -> Sources:
    """Where the packages come from. Nothing here falls back to another source: the recipe's own
    index unless the person named another (--index-url, --find-links/--no-index, --use-pip-config)."""
    if opts.use_pip_config and (opts.index_url or opts.no_index):
        raise MlprobeError("--use-pip-config cannot be combined with --index-url or --no-index",
                           why="--use-pip-config lets pip's configuration choose the sources",
                           next_step="keep one of them", ref="E513", exit_code=EXIT_USAGE)
    if opts.no_index and not opts.find_links:
        raise MlprobeError("--no-index needs --find-links DIR",
                           why="with no index there is nothing to install from",
                           next_step="add --find-links DIR (a folder of wheels)", ref="E513",
                           exit_code=EXIT_USAGE)
    index_url, extra, find = _checked_sources(opts)
    if opts.use_pip_config:
        return Sources(find_links=find, extra_index_urls=extra, use_pip_config=True,
                       origin="pip configuration")
    if opts.no_index:
        return Sources(no_index=True, find_links=find, origin="--find-links")
    if index_url:
        return Sources(index_url=index_url, extra_index_urls=extra, find_links=find,
                       origin="--index-url")
    if recipe_url:
        return Sources(index_url=recipe_url, extra_index_urls=tuple(recipe_extra) + extra, find_links=find,
                       origin="recipe")
    # A recipe published on the Python Package Index: pip's built-in default index, with the
    # sources of pip's configuration set aside like for any other recipe.
    return Sources(index_url=default_index_url(), extra_index_urls=extra, find_links=find,
                   origin="default index")


def build_plan(rec: Dict[str, Any], opts: InstallOptions) -> InstallPlan:
    packages = _package_specs(rec)
    if not packages:
        raise MlprobeError(f"recipe {recipe_id(rec)} names no packages", why="nothing to install",
                           next_step="pick another recipe with --recipe ID", ref="E513", exit_code=EXIT_USAGE)
    commands = [str(c) for c in _as_list(rec.get("commands")) if isinstance(c, str)]
    raw_index = rec.get("index")
    pip_block: Dict[str, Any] = rec["pip"] if isinstance(rec.get("pip"), dict) else {}
    url = rec.get("index_url") or pip_block.get("index_url")
    index: Optional[str] = None
    if isinstance(raw_index, dict):  # {"id": "pytorch", "suffix": "cpu", "url": ...}
        index = str(raw_index.get("suffix") or "") or None
        url = url or raw_index.get("url")
    elif isinstance(raw_index, str):
        index = raw_index
    cmd_url, cmd_extra = _urls_from_commands(commands)
    if not url and index and "://" in index:
        url = index
    url = url or cmd_url
    warnings = [str(w) for w in _as_list(rec.get("warnings"))]
    if url and not _is_url(str(url)):
        # The recipe data may leave the URL out (a placeholder such as <pytorch-index>).
        url = None
    extra = [str(u) for u in _as_list(rec.get("extra_index_urls")) if _is_url(str(u))] or \
        [u for u in cmd_extra if _is_url(u)]
    if index and not url and not (opts.index_url or opts.use_pip_config or opts.no_index):
        # Never fall back to another source without being told to.
        raise MlprobeError(f"recipe {recipe_id(rec)} names the '{index}' build index but no URL for it",
                           why="the recommendation carries no index URL",
                           next_step="pass --index-url URL (a mirror), --find-links DIR (a folder of wheels), "
                                     "or --use-pip-config (let pip's own configuration choose)",
                           ref="E518", exit_code=EXIT_USAGE)
    label = _label_of(index, str(url) if url else None) if (index or url) else None
    framework = rec.get("framework")
    verify: Dict[str, Any] = rec["verify"] if isinstance(rec.get("verify"), dict) else {}
    imports = [str(i) for i in _as_list(rec.get("imports"))]
    known = vocabulary().framework(framework) if isinstance(framework, str) else None
    if not imports and known is not None:
        imports = [known.import_name]
    shims, env_extra_cmds = [], []
    for st in _as_list(rec.get("steps")):
        if isinstance(st, dict) and st.get("shim"):
            shims.append(str(st["shim"]))
        elif isinstance(st, dict) and st.get("command"):
            env_extra_cmds.append(str(st["command"]))
    raw_env: Dict[str, Any] = rec["env"] if isinstance(rec.get("env"), dict) else {}
    env = {str(k): str(v) for k, v in raw_env.items()}
    files = []
    for f in _as_list(rec.get("config_files")) + _as_list(rec.get("files")):
        if isinstance(f, dict) and f.get("path"):
            content = f.get("content")
            if content is None and "json" in f:
                content = json.dumps(f["json"], indent=2) + "\n"
            files.append({"path": str(f["path"]), "content": str(content or "")})
    sources = choose_sources(opts, str(url) if url else None, extra)
    return InstallPlan(
        recipe=recipe_id(rec),
        title=str(rec.get("title") or rec.get("summary") or recipe_id(rec)),
        framework=str(framework) if framework else None,
        backend=str(rec.get("backend")) if rec.get("backend") else None,
        device=str(rec.get("device") or verify.get("device") or "") or None,
        packages=packages,
        recipe_index_url=str(url) if url else None,
        recipe_extra_index_urls=extra,
        variant_label=label if url or index else None,
        sources=sources,
        env=env,
        config_files=files,
        shims=shims,
        commands=commands + env_extra_cmds,
        imports=imports,
        python_spec=str(rec.get("python")) if rec.get("python") else None,
        verify_framework=str(verify["framework"]) if verify.get("framework") else None,
        pip_args=[str(a) for a in _as_list(rec.get("pip_args"))],
        warnings=warnings,
    )
