"""A fitting recipe made concrete: the wheel index and its URL (knowledge/indexes.json, or a mirror the
caller names), the packages, settings files, shim steps and environment the recipe's templates give on
this machine, and the commands a person pastes, each word quoted for its shell. Pure: no I/O."""

from __future__ import annotations

import json
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..model import shell
from ..model.context import RulesContext
from ..model.knowledge import Knowledge, Row
from ..model.plan import ConfigFile, ShimStep, VerifyTarget
from ..model.recipe import Install, Recipe
from ..urls import check_url, join_path, strip_slash
from .conditions import Effects, evaluate, resolve
from .rules import Verdict


class IndexBase:
    """Where one wheel index of knowledge/indexes.json lives: its URL (None when this mlprobe's
    knowledge lacks it and nobody named a mirror), whether that is a mirror, the placeholder the
    commands show without a URL, and the variable that names a mirror."""

    __slots__ = ("url", "mirror", "placeholder", "env")

    def __init__(self, url: Optional[str], mirror: bool, placeholder: str, env: Optional[str]) -> None:
        self.url = url
        self.mirror = mirror
        self.placeholder = placeholder
        self.env = env


class InstallDetails:
    """What installing a fitting recipe takes on this machine."""

    __slots__ = ("index", "index_url", "extra_index_urls", "version", "packages", "env", "files", "steps",
                 "commands", "verify")

    def __init__(self, index: Optional[str], index_url: Optional[str], extra_index_urls: Tuple[str, ...],
                 version: Optional[str], packages: Tuple[str, ...], env: Mapping[str, str],
                 files: Tuple[ConfigFile, ...], steps: Tuple[ShimStep, ...], commands: Tuple[str, ...],
                 verify: VerifyTarget) -> None:
        self.index = index
        self.index_url = index_url
        self.extra_index_urls = extra_index_urls
        self.version = version
        self.packages = packages
        self.env = env
        self.files = files
        self.steps = steps
        self.commands = commands
        self.verify = verify


def index_bases(kb: Knowledge, index_urls: Optional[Mapping[str, str]], env: Mapping[str, str]) -> Dict[str, IndexBase]:
    out: Dict[str, IndexBase] = {}
    for row in kb.rows("indexes", "indexes"):
        rid = str(row.get("id"))
        url = (index_urls or {}).get(rid)
        origin = "index_urls"
        env_name = row.text("env")
        if url is None and env_name:
            url = env.get(env_name) or None
            origin = env_name
        if url is not None:
            url = check_url(url, origin)
        out[rid] = IndexBase(url=strip_slash(url or row.text("url") or "") or None, mirror=url is not None,
                             placeholder=row.text("placeholder", f"<{rid}-index>") or "", env=env_name)
    return out


def _render(value: object, ctx: RulesContext, row: Optional[Row], effects: Effects) -> object:
    if isinstance(value, dict):
        return {k: _render(v, ctx, row, effects) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, ctx, row, effects) for v in value]
    return resolve(value, ctx, row, effects)


def _text(value: object) -> Optional[str]:
    return None if value is None or value == "" else str(value)


def install_details(recipe: Recipe, verdict: Verdict, ctx: RulesContext, kb: Knowledge,
                    bases: Mapping[str, IndexBase]) -> InstallDetails:
    inst = recipe.install
    row, eff = verdict.row, verdict.effects
    pkgs_t = inst.pinned_packages if (verdict.newer_rejected and inst.pinned_packages) else inst.packages
    rendered = [str(_render(p, ctx, row, eff)) for p in pkgs_t]
    packages = tuple(p.strip() for p in rendered if p.strip())
    index = index_url = None
    idx = inst.index
    base = bases.get(idx.id) if idx else None
    if idx:
        suffix = _render(idx.suffix, ctx, row, eff)
        if suffix:
            index = str(suffix)
            index_url = join_path(base.url, index) if base and base.url else None
    extra_index_urls = _extra_indexes(inst, ctx, kb, row, eff, bases)
    env: Dict[str, str] = dict(inst.env)
    env.update({k: str(v) for k, v in (eff.env or {}).items()})
    files = []
    for f in inst.files:
        obj = _render(f.json, ctx, row, eff)
        files.append(ConfigFile(f.path, obj, json.dumps(obj, indent=2) + "\n", f.why or None))
    steps = tuple(ShimStep(st.shim, st.why or None) for st in inst.steps
                  if st.when is None or evaluate(st.when, ctx, kb, row).value is not False)
    version_key = recipe.variants.version_key if recipe.variants else None
    version = str(row.get(version_key)) if row and version_key and row.get(version_key) else None
    windows = ctx.os.system == "Windows" and not ctx.os.wsl
    commands = _commands(rendered, index, index_url, base, steps, files, env, windows, extra_index_urls, recipe.id)
    verify = _render(dict(recipe.verify), ctx, row, eff)
    target = verify if isinstance(verify, dict) else {}
    return InstallDetails(
        index=index, index_url=index_url, extra_index_urls=extra_index_urls, version=version, packages=packages,
        env=env, files=tuple(files), steps=steps, commands=tuple(commands),
        verify=VerifyTarget(_text(target.get("framework")), _text(target.get("device"))),
    )


def _extra_indexes(inst: Install, ctx: RulesContext, kb: Knowledge, row: Optional[Row], eff: Effects,
                   bases: Mapping[str, IndexBase]) -> Tuple[str, ...]:
    """The recipe's `extra_indexes` that apply here (their `when` holds or is unknown), as URLs: a
    package set whose packages live on two indexes (torch-npu on the default index pins
    torch==X+cpu, which only PyTorch's cpu index publishes). An index without a URL (its base was
    not configured) shows as its placeholder, like the main index."""
    urls: List[str] = []
    for ex in inst.extra_indexes:
        if ex.when is not None and evaluate(ex.when, ctx, kb, row).value is False:
            continue
        suffix = str(_render(ex.suffix, ctx, row, eff) or "")
        base = bases.get(ex.id)
        urls.append(join_path(base.url, suffix) if base and base.url
                    else f"{base.placeholder if base else '<index>'}/{suffix}")
    return tuple(urls)


def _commands(packages: Sequence[str], index: Optional[str], index_url: Optional[str], base: Optional[IndexBase],
              steps: Sequence[ShimStep], files: Sequence[ConfigFile], env: Mapping[str, str],
              windows: bool, extra_index_urls: Sequence[str] = (), recipe: str = "") -> List[str]:
    """The steps a person pastes, each word quoted for the shell (PowerShell on Windows, POSIX
    elsewhere): package names, the settings file's text and every variable's value come from recipes
    and from the scanned machine (a device name), so none is trusted as shell text. A recipe with a
    shim or settings gets `mlprobe install --settings-only` for the activated venv: its start-up
    hook loads the shim and sets the variables at every start of that venv's Python (an IDE,
    Jupyter, cron, `uv run`), not only in this shell; the variables follow for this shell."""
    commands: List[str] = []
    if packages:
        argv = ["python", "-m", "pip", "install", *packages]
        if index:
            argv += ["--index-url", index_url or f"{base.placeholder if base else '<index>'}/{index}"]
        for url in extra_index_urls:
            argv += ["--extra-index-url", url]
        commands.append(shell.command(argv, windows))
    if any(st.shim == "plaidml-collections" for st in steps) or env:
        commands.append(shell.command(["mlprobe", "install", "--recipe", recipe or "<recipe>", "--settings-only"],
                                      windows))
    for f in files:
        commands.append(shell.write_file(f.path, json.dumps(f.json), windows))
    for k, v in env.items():
        commands.append(shell.set_env(k, v, windows))
    return commands


__all__ = ["IndexBase", "InstallDetails", "index_bases", "install_details"]
