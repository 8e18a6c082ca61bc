"""A plan's recommendation turned into an InstallPlan: the packages, where they come from, the env
vars, files and shims, and the steps a person (or --apply) carries out.

The input is the typed contract mlprobe.model.plan.Recommendation: an entry of `mlprobe plan`'s
`recommended` list, or a --recipe-file of the same shape, read through Recommendation.from_json.
The index URL is the plan's `index_url`; the printed `commands` are shown, never parsed.
"""

from __future__ import annotations

import keyword
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import StageError
from ..model.jsontypes import JsonObject, JsonValue
from ..model.plan import ContractError, Plan, Recommendation
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
    device_check: bool = True
    keep_without_device: bool = False  # keep an environment whose framework does not list the device
    log: Optional[Path] = None
    timeout_s: float = 3600.0
    check_timeout_s: float = 6.0
    kernel: Optional[bool] = None  # a Jupyter kernel spec in the venv: None = when it has ipykernel
    user_kernel: bool = False  # the same spec at the user level too
    force: bool = False  # replace a start-up hook edited by hand, or a foreign .pth of its name


@dataclass
class Step:
    kind: str  # venv | install | env | file | shim | check | verify | note
    text: str
    command: Optional[str] = None

    def to_dict(self) -> JsonObject:
        return {"kind": self.kind, "text": self.text, "command": self.command}


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
    # folders the activate scripts put first on a path-list variable (a device-check fix)
    prepend: Dict[str, str] = field(default_factory=dict)
    config_files: List[Dict[str, str]] = field(default_factory=list)
    shims: List[str] = field(default_factory=list)
    commands: List[str] = field(default_factory=list)
    imports: List[str] = field(default_factory=list)
    python_spec: Optional[str] = None
    verify_framework: Optional[str] = None
    pip_args: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    # the recommendation installed (kept in the lock written after --apply)
    recommendation: Optional[Recommendation] = None
    # --from-lock: a hashed requirements file of the lock's files, installed instead of `packages`
    lock_requirements: Optional[str] = None
    lock_file: Optional[str] = None
    # written by --apply: files added inside the venv (config files, loader fixes), kernel specs, launcher
    added: List[str] = field(default_factory=list)
    kernels: List[str] = field(default_factory=list)
    launcher: Optional[str] = None

    def to_dict(self) -> JsonObject:
        """The JSON of `install --json`'s `recipe` (the recommendation itself is `mlprobe plan --json`'s)."""
        d: JsonObject = {
            "recipe": self.recipe, "title": self.title, "framework": self.framework, "backend": self.backend,
            "device": self.device, "packages": list(self.packages), "recipe_index_url": self.recipe_index_url,
            "recipe_extra_index_urls": list(self.recipe_extra_index_urls), "variant_label": self.variant_label,
            "sources": self.sources.to_dict(), "env": dict(self.env), "prepend": dict(self.prepend),
            "config_files": [dict(f) for f in self.config_files], "shims": list(self.shims),
            "commands": list(self.commands), "imports": list(self.imports), "python_spec": self.python_spec,
            "verify_framework": self.verify_framework, "pip_args": list(self.pip_args),
            "warnings": list(self.warnings), "notes": list(self.notes)}
        if self.lock_requirements is not None:
            d["lock_requirements"] = self.lock_requirements
        if self.lock_file is not None:
            d["lock_file"] = self.lock_file
        return d


def _as_list(v: JsonValue) -> List[JsonValue]:
    if v is None:
        return []
    if isinstance(v, list):
        return list(v)
    return [v]


def _is_url(u: str) -> bool:
    return "://" in u and "<" not in u and " " not in u


def _label_of(index: Optional[str], url: Optional[str]) -> Optional[str]:
    if index and "://" not in index:
        return index.strip().strip("/") or None
    src = url or index
    if src:
        tail = urlsplit(src).path.rstrip("/").rsplit("/", 1)[-1]
        if tail and tail not in ("simple", "whl"):
            return tail
    return None


def _recommendation(doc: JsonObject) -> Recommendation:
    """A recommendation from a document (a --recipe-file, a plan file's entry, a lock's): E513 when it
    is not one."""
    try:
        return Recommendation.from_json(doc)
    except ContractError as exc:
        raise StageError(f"{doc.get('recipe') or 'the recipe'} is not a recommendation mlprobe can install",
                         why=str(exc), next_step="pass a recommendation or a plan from `mlprobe plan --json`",
                         ref="E513", kind="usage") from None


def _choose(names: Sequence[str], rejected: Callable[[str], Optional[Sequence[object]]], recipe: Optional[str]) -> int:
    """Which recommendation to install: the first, or the one named --recipe (its reasons when the plan
    rejected it)."""
    if recipe:
        if recipe in names:
            return names.index(recipe)
        why = rejected(recipe)
        if why is not None:
            raise StageError(
                f"recipe {recipe} does not fit this machine",
                why="; ".join(map(str, why)) or "the plan rejected it",
                next_step="`mlprobe plan` lists the recipes that fit", ref="E525", kind="unavailable")
        raise StageError(f"no recipe {recipe} in the plan", why=f"the plan has: {', '.join(names) or 'none'}",
                         next_step="`mlprobe plan` lists the recipes; pass one of them with --recipe",
                         ref="E524", kind="usage")
    if not names:
        raise StageError("no recipe fits this machine for that framework",
                         why="the plan recommends nothing",
                         next_step="`mlprobe plan` says why each recipe was rejected; try --framework any",
                         ref="E525", kind="unavailable")
    return 0


def pick(plan: Plan, recipe: Optional[str]) -> Recommendation:
    """The first recommendation of a plan, or the one named --recipe."""
    i = _choose([r.recipe for r in plan.recommended],
                lambda name: next((r.reasons for r in plan.rejected if r.recipe == name), None), recipe)
    return plan.recommended[i]


def pick_recommendation(plan: JsonObject, recipe: Optional[str]) -> Recommendation:
    """The same from a plan file (`mlprobe plan --json` in a file, or a hand-written one with a
    `recommended` list), read as it is: only the entry picked must be a recommendation mlprobe can
    install, and it becomes the typed Recommendation here."""
    recs = [r for r in _as_list(plan.get("recommended")) if isinstance(r, dict)]

    def rejected(name: str) -> Optional[Sequence[object]]:
        hit = [r for r in _as_list(plan.get("rejected")) if isinstance(r, dict) and r.get("recipe") == name]
        return _as_list(hit[0].get("reasons")) if hit else None

    return _recommendation(recs[_choose([str(r.get("recipe")) for r in recs], rejected, recipe)])


def recommendation_from_file(doc: JsonObject) -> Recommendation:
    """--recipe-file (or the recommendation a lock carries): one recommendation, as `plan --json`
    prints it in `recommended`."""
    return _recommendation(doc)


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
            raise StageError(f"--find-links {d}: no such folder",
                             why="--find-links takes a folder of wheels (or the URL of a page of links)",
                             next_step="check the path", ref="E517", kind="usage")
        else:
            links.append(d)
    return index, extra, tuple(links)


def choose_sources(opts: InstallOptions, recipe_url: Optional[str], recipe_extra: List[str]) -> Sources:
    """Where the packages come from. Nothing here falls back to another source: the recipe's own
    index unless the person named another (--index-url, --find-links/--no-index, --use-pip-config)."""
    if opts.use_pip_config and (opts.index_url or opts.no_index):
        raise StageError("--use-pip-config cannot be combined with --index-url or --no-index",
                         why="--use-pip-config lets pip's configuration choose the sources",
                         next_step="keep one of them", ref="E523", kind="usage")
    if opts.no_index and not opts.find_links:
        raise StageError("--no-index needs --find-links DIR",
                         why="with no index there is nothing to install from",
                         next_step="add --find-links DIR (a folder of wheels)", ref="E523",
                         kind="usage")
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
    # A recipe may add its own second index (torch-npu: PyTorch's cpu index for torch==X+cpu).
    return Sources(index_url=default_index_url(), extra_index_urls=tuple(recipe_extra) + extra, find_links=find,
                   origin="default index")


def checked_requirement(recipe: str, text: str) -> str:
    """A recipe's package: one PEP 508 requirement from an index, never a pip option (`--index-url=…`,
    `-r FILE`, `-e DIR`) nor a direct URL (a source of its own, past the index checks)."""
    def refuse(why: str) -> StageError:
        return StageError(f"recipe {recipe}: the package {text!r} is not a requirement mlprobe installs",
                          why=why, next_step="list requirements such as \"six\" or \"torch==2.13.0\"; pass "
                                             "sources with --index-url / --find-links, not in the recipe",
                          ref="E513", kind="usage")

    if text.startswith("-") or any(c in text for c in "\r\n\x00"):
        raise refuse("it is a pip option (or several lines), which pip would obey")
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise refuse(str(exc).splitlines()[0][:200]) from None
    if req.url:
        raise refuse("a direct URL reference installs from outside the sources mlprobe checks")
    return text


def checked_import(recipe: str, text: str) -> str:
    """A module the import check imports: a dotted name of identifiers, never Python code."""
    parts = text.split(".")
    if not text or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts) or not text.isascii():
        raise StageError(f"recipe {recipe}: the import {text!r} is not a module name",
                         why="`imports` names modules (dotted identifiers such as torch or jax.numpy); "
                             "mlprobe runs `import NAME` with it",
                         next_step="fix the recipe's `imports` list", ref="E513", kind="usage")
    return text


def build_plan(rec: Recommendation, opts: InstallOptions) -> InstallPlan:
    """The install steps for one typed recommendation. The index URL is the one the plan carries
    (`index_url`); the printed commands are never read back."""
    if not rec.packages:
        raise StageError(f"recipe {rec.recipe} names no packages", why="nothing to install",
                         next_step="pick another recipe with --recipe ID", ref="E513", kind="usage")
    packages = [checked_requirement(rec.recipe, p) for p in rec.packages]
    index = rec.index
    url: Optional[str] = rec.index_url if rec.index_url and _is_url(rec.index_url) else None
    if index and "://" in index and not url:
        url = index
    if index and not url and not (opts.index_url or opts.use_pip_config or opts.no_index):
        # Never fall back to another source without being told to.
        raise StageError(f"recipe {rec.recipe} names the '{index}' build index but no URL for it",
                         why="the recommendation carries no index URL",
                         next_step="pass --index-url URL (a mirror), --find-links DIR (a folder of wheels), "
                                     "or --use-pip-config (let pip's own configuration choose)",
                         ref="E518", kind="usage")
    extra_urls = [u for u in rec.extra_index_urls if _is_url(u)]
    unset = [u for u in rec.extra_index_urls if not _is_url(u)]
    if unset and not (opts.index_url or opts.use_pip_config or opts.no_index):
        raise StageError(f"recipe {rec.recipe} needs a second index ({unset[0]}) with no URL for it",
                         why="part of its packages come from that index",
                         next_step="set the index's base URL (see `mlprobe plan`'s warning), or pass --index-url "
                                   "URL (a mirror with every package), --find-links DIR, or --use-pip-config",
                         ref="E518", kind="usage")
    label = _label_of(index, url) if (index or url) else None
    known = vocabulary().framework(rec.framework)
    imports = [checked_import(rec.recipe, m) for m in
               (list(rec.imports) or ([known.import_name] if known is not None else []))]
    sources = choose_sources(opts, url, extra_urls)
    return InstallPlan(
        recipe=rec.recipe,
        title=rec.title,
        framework=rec.framework,
        backend=rec.backend,
        device=rec.device or rec.verify.device,
        packages=packages,
        recipe_index_url=url,
        recipe_extra_index_urls=extra_urls,
        variant_label=label,
        sources=sources,
        env=dict(rec.env),
        config_files=[{"path": f.path, "content": f.content} for f in rec.files],
        shims=[st.shim for st in rec.steps],
        commands=list(rec.commands),
        imports=imports,
        verify_framework=rec.verify.framework,
        # a step the wheels do not bring (a vendor toolkit, a newer driver): said before anything else
        warnings=[f"before this install: {p}" for p in rec.prerequisites] + list(rec.warnings),
        recommendation=rec,
    )
