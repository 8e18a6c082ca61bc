"""The recipe's environment variables (HSA_OVERRIDE_GFX_VERSION, PLAIDML_DEVICE_IDS …) written into
the venv's own activate scripts, between markers, so activating the venv sets them and `deactivate`
puts back what was there before. mlprobe never edits shell rc files; it prints the lines instead.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from ..errors import StageError

BEGIN = "# >>> mlprobe env >>>"
END = "# <<< mlprobe env <<<"
REM_BEGIN = "REM >>> mlprobe env >>>"
REM_END = "REM <<< mlprobe env <<<"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_names(env: Dict[str, str]) -> None:
    bad = [k for k in env if not _NAME.match(k)]
    if bad:
        raise StageError(f"the recipe sets variables with unusable names: {', '.join(bad)}",
                         next_step="fix the recipe data", ref="E513", kind="usage")


def _sh(v: str) -> str:
    return "'" + v.replace("'", "'\\''") + "'"


def _fish(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ps(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def _bat(v: str) -> str:
    return v.replace("%", "%%").replace('"', "")


def _strip_block(text: str, begin: str, end: str) -> str:
    pattern = re.compile(rf"\n?[ \t]*{re.escape(begin)}.*?{re.escape(end)}[^\n]*\n?", re.S)
    return pattern.sub("\n", text)


def _clean(text: str) -> str:
    had = BEGIN in text or REM_BEGIN in text
    for b, e in ((BEGIN, END), (REM_BEGIN, REM_END)):
        text = _strip_block(text, b, e)
    if had:  # what _append added: one blank line before the block
        text = re.sub(r"(\r?\n)(\r?\n)+\Z", r"\1", text)
    return text


def posix_block(env: Dict[str, str], prepend: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    """(lines for the end of bin/activate, lines for the top of its deactivate function). The
    restore runs only when mlprobe's block had run (activate itself calls `deactivate` first).
    `prepend` puts a folder first on a path-list variable (LD_LIBRARY_PATH), keeping what was there."""
    prepend = dict(prepend or {})
    sets = [BEGIN]
    for k, v in list(env.items()) + list(prepend.items()):
        sets.append(f'if [ -n "${{{k}+_}}" ] ; then _MLPROBE_OLD_{k}="${k}" ; export _MLPROBE_OLD_{k} ; fi')
        if k in prepend and k not in env:
            sets.append(f'{k}={_sh(v)}"${{{k}:+:${k}}}"')
        else:
            sets.append(f"{k}={_sh(v)}")
        sets.append(f"export {k}")
    sets += ["_MLPROBE_ENV_ACTIVE=1", "export _MLPROBE_ENV_ACTIVE", END]
    unsets = ["    " + BEGIN, '    if [ -n "${_MLPROBE_ENV_ACTIVE:-}" ] ; then']
    for k in list(env) + [k for k in prepend if k not in env]:
        unsets.append(f'        if [ -n "${{_MLPROBE_OLD_{k}+_}}" ] ; then {k}="$_MLPROBE_OLD_{k}" ; '
                      f"export {k} ; unset _MLPROBE_OLD_{k} ; else unset {k} ; fi")
    unsets += ["        unset _MLPROBE_ENV_ACTIVE", "    fi", "    " + END]
    return "\n".join(sets) + "\n", "\n".join(unsets) + "\n"


def fish_block(env: Dict[str, str], prepend: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    prepend = {k: v for k, v in (prepend or {}).items() if k not in env}
    sets = [BEGIN]
    for k, v in list(env.items()) + list(prepend.items()):
        sets.append(f"if set -q {k}; set -gx _MLPROBE_OLD_{k} ${k}; end")
        if k in prepend:
            sets.append(f"if set -q {k}; set -gx {k} {_fish(v)}:${k}; else; set -gx {k} {_fish(v)}; end")
        else:
            sets.append(f"set -gx {k} {_fish(v)}")
    sets += ["set -gx _MLPROBE_ENV_ACTIVE 1", END]
    unsets = ["    " + BEGIN, "    if set -q _MLPROBE_ENV_ACTIVE"]
    for k in list(env) + list(prepend):
        unsets.append(f"        if set -q _MLPROBE_OLD_{k}; set -gx {k} $_MLPROBE_OLD_{k}; "
                      f"set -e _MLPROBE_OLD_{k}; else; set -e {k}; end")
    unsets += ["        set -e _MLPROBE_ENV_ACTIVE", "    end", "    " + END]
    return "\n".join(sets) + "\n", "\n".join(unsets) + "\n"


def csh_block(env: Dict[str, str], prepend: Optional[Mapping[str, str]] = None) -> str:
    lines = [BEGIN] + [f"setenv {k} {_sh(v)}" for k, v in env.items()]
    for k, v in (prepend or {}).items():
        if k not in env:
            lines.append(f'if ($?{k}) then\n    setenv {k} {_sh(v)}":${{{k}}}"\nelse\n    setenv {k} {_sh(v)}\nendif')
    lines.append(END)
    return "\n".join(lines) + "\n"


def ps1_block(env: Dict[str, str]) -> Tuple[str, str]:
    sets = [BEGIN] + [f"$env:{k} = {_ps(v)}" for k, v in env.items()] + [END]
    unsets = ["    " + BEGIN]
    unsets += [f"    Remove-Item -Path env:{k} -ErrorAction SilentlyContinue" for k in env]
    unsets.append("    " + END)
    return "\n".join(sets) + "\n", "\n".join(unsets) + "\n"


def _insert_after_line(text: str, pattern: str, block: str) -> str:
    m = re.search(pattern, text, re.M)
    if not m:
        return text
    at = text.find("\n", m.end())
    at = len(text) if at < 0 else at + 1
    return text[:at] + block + text[at:]


def _append(text: str, block: str) -> str:
    return text.rstrip("\n") + "\n\n" + block


def render_scripts(env: Dict[str, str], scripts: Dict[str, str],
                   prepend: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Pure: the new text of each activate script (name -> old text) with env set; empty env clears.
    `prepend` (LD_LIBRARY_PATH -> folder) goes into the POSIX shells' scripts only: it is for Linux."""
    out: Dict[str, str] = {}
    for name, old in scripts.items():
        text = _clean(old)
        if not env and not prepend:
            out[name] = text
            continue
        if name == "activate":
            sets, unsets = posix_block(env, prepend)
            text = _insert_after_line(text, r"^deactivate\s*\(\)\s*\{\s*$", unsets)
            text = _append(text, sets)
        elif name == "activate.fish":
            sets, unsets = fish_block(env, prepend)
            text = _insert_after_line(text, r"^function deactivate\b.*$", unsets)
            text = _append(text, sets)
        elif name == "activate.csh":
            text = _append(text, csh_block(env, prepend))
        elif not env:
            out[name] = text
            continue
        elif name == "Activate.ps1":
            sets, unsets = ps1_block(env)
            text = _insert_after_line(text, r"^function global:deactivate\b.*\{\s*$", unsets)
            sig = text.find("# SIG # Begin signature block")
            if sig >= 0:  # the signature block must stay last
                text = text[:sig].rstrip("\n") + "\n\n" + sets + "\n" + text[sig:]
            else:
                text = _append(text, sets)
        elif name == "activate.bat":
            lines = [REM_BEGIN] + [f'set "{k}={_bat(v)}"' for k, v in env.items()] + [REM_END]
            text = _append(text.replace("\r\n", "\n"), "\n".join(lines) + "\n").replace("\n", "\r\n")
        elif name == "deactivate.bat":
            lines = [REM_BEGIN] + [f'set "{k}="' for k in env] + [REM_END]
            text = _append(text.replace("\r\n", "\n"), "\n".join(lines) + "\n").replace("\n", "\r\n")
        out[name] = text
    return out


SCRIPT_NAMES = ("activate", "activate.fish", "activate.csh", "Activate.ps1", "activate.bat", "deactivate.bat")


def activate_scripts(scripts_dir: Path) -> List[Path]:
    return [scripts_dir / n for n in SCRIPT_NAMES if (scripts_dir / n).is_file()]


def write_env(scripts_dir: Path, env: Dict[str, str], prepend: Optional[Mapping[str, str]] = None) -> List[Path]:
    """Write env (and `prepend`: folders put first on path-list variables) into every activate
    script found in scripts_dir; returns those written."""
    check_names(dict(env, **dict(prepend or {})))
    paths = activate_scripts(scripts_dir)
    olds = {p.name: p.read_bytes().decode("utf-8", "replace") for p in paths}
    news = render_scripts(env, olds, prepend)
    written = []
    for p in paths:
        if news[p.name] != olds[p.name]:
            p.write_bytes(news[p.name].encode("utf-8"))
            written.append(p)
    return written


def shell_lines(env: Dict[str, str]) -> List[str]:
    """What to type by hand (for --system, where there is no activate script to carry them)."""
    return [f"export {k}={_sh(v)}" for k, v in env.items()]


_POSIX_SET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)='((?:[^']|'\\'')*)'$")
_POSIX_PREPEND = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)='((?:[^']|'\\'')*)'\"\$\{\1:\+:\$\1\}\"$")


def read_prepend(scripts_dir: Path) -> Dict[str, str]:
    """The folders mlprobe's block of bin/activate puts first on path-list variables."""
    out: Dict[str, str] = {}
    for line in _block_lines(scripts_dir):
        m = _POSIX_PREPEND.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2).replace("'\\''", "'")
    return out


def _block_lines(scripts_dir: Path) -> List[str]:
    try:
        text = (scripts_dir / "activate").read_bytes().decode("utf-8", "replace")
    except OSError:
        return []
    start = text.rfind("\n" + BEGIN + "\n")
    if start < 0:
        return []
    end = text.find("\n" + END, start)
    return text[start:end if end > 0 else len(text)].splitlines()


def read_env(scripts_dir: Path) -> Dict[str, str]:
    """The variables mlprobe wrote into this environment's bin/activate (its marked block), so that
    a later check or `mlprobe verify --python` runs with what activating the venv gives. {} when there
    is no such block or the script cannot be read."""
    out: Dict[str, str] = {}
    for line in _block_lines(scripts_dir):
        m = _POSIX_SET.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2).replace("'\\''", "'")
    return out


def activated_env(base: Mapping[str, str], venv: Optional[Path], scripts_dir: Optional[Path],
                  env: Mapping[str, str], prepend: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """`base` as activating the venv changes it: VIRTUAL_ENV, its scripts first on PATH, no
    PYTHONHOME, the recipe's variables (which, like activate, win over what was set), and the folders
    `prepend` puts first on path-list variables."""
    out = dict(base)
    if venv is not None and scripts_dir is not None:
        out["VIRTUAL_ENV"] = str(venv)
        out["PATH"] = str(scripts_dir) + os.pathsep + out.get("PATH", "")
        out.pop("PYTHONHOME", None)
    out.update({str(k): str(v) for k, v in env.items()})
    for k, v in (prepend or {}).items():
        if k not in env:
            out[k] = v + (os.pathsep + out[k] if out.get(k) else "")
    return out


def env_of_interpreter(python: str, base: Mapping[str, str]) -> Dict[str, str]:
    """What activating the venv that `python` belongs to adds to `base` (the changed or new
    variables only); {} when `python` is not in a venv. A venv's python may be a link to its base
    interpreter, so the venv is found from the path as given, not the resolved one."""
    scripts = Path(os.path.abspath(python)).parent
    venv = scripts.parent
    if not (venv / "pyvenv.cfg").is_file():
        return {}
    if os.path.normcase(base.get("VIRTUAL_ENV", "")) == os.path.normcase(str(venv)):
        return {}  # already active: the environment is as the person has it, their own changes included
    full = activated_env(base, venv, scripts, read_env(scripts), read_prepend(scripts))
    return {k: v for k, v in full.items() if base.get(k) != v}
