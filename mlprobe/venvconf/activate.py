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


# What no place a setting goes can hold (cmd's `set "K=V"` ends at a line break and takes the last
# quote as its end; a NUL ends a C string): refused for all of them, before anything is written.
_UNHOLDABLE = {"\n": "a line break", "\r": "a carriage return", "\x00": "a NUL character",
               '"': "a double quote (cmd's activate.bat cannot hold it)"}


def check_values(env: Mapping[str, str]) -> None:
    """Refuse, up front and for every place settings go (each activate flavour, the start-up hook, the
    kernel spec), a value one of them cannot hold."""
    check_names(dict(env))
    for k, v in env.items():
        bad = [what for ch, what in _UNHOLDABLE.items() if ch in v]
        if bad:
            raise StageError(f"the value of {k} cannot be written as a setting: it holds {bad[0]}",
                             why=f"{k}={v!r}; a setting must reach every activate script (sh, fish, csh, "
                                 "PowerShell, cmd), the start-up hook and the kernel spec unchanged",
                             next_step="give the variable a value on one line without double quotes",
                             ref="E560", kind="usage")


def _sh(v: str) -> str:
    return "'" + v.replace("'", "'\\''") + "'"


def _fish(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ps(v: str) -> str:
    """PowerShell's single-quoted string: it also ends at the typographic single quotes (U+2018-U+201B),
    so each of them is doubled too."""
    from ..model.shell import ps_quote

    return ps_quote(v)


def _bat(v: str) -> str:
    return v.replace("%", "%%")


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


def _marker(k: str) -> str:
    """Set while activate's block set `k` itself (it was unset before): `deactivate` unsets only those."""
    return f"_MLPROBE_SET_{k}"


def posix_block(env: Dict[str, str], prepend: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    """(lines for the end of bin/activate, lines for the top of its deactivate function). A value the
    person set before activating wins (as in the start-up hook); `deactivate` unsets only what the
    block set. The restore runs only when mlprobe's block had run (activate itself calls `deactivate`
    first). `prepend` puts a folder first on a path-list variable (LD_LIBRARY_PATH), keeping what was there."""
    prepend = {k: v for k, v in (prepend or {}).items() if k not in env}
    sets = [BEGIN]
    for k, v in env.items():
        sets.append(f'if [ -z "${{{k}+_}}" ] ; then {k}={_sh(v)} ; export {k} ; '
                    f"{_marker(k)}=1 ; export {_marker(k)} ; fi")
    for k, v in prepend.items():
        sets.append(f'if [ -n "${{{k}+_}}" ] ; then _MLPROBE_OLD_{k}="${k}" ; export _MLPROBE_OLD_{k} ; fi')
        sets.append(f'{k}={_sh(v)}"${{{k}:+:${k}}}"')
        sets.append(f"export {k}")
    sets += ["_MLPROBE_ENV_ACTIVE=1", "export _MLPROBE_ENV_ACTIVE", END]
    unsets = ["    " + BEGIN, '    if [ -n "${_MLPROBE_ENV_ACTIVE:-}" ] ; then']
    for k in env:
        unsets.append(f'        if [ -n "${{{_marker(k)}:-}}" ] ; then unset {k} {_marker(k)} ; fi')
    for k in prepend:
        unsets.append(f'        if [ -n "${{_MLPROBE_OLD_{k}+_}}" ] ; then {k}="$_MLPROBE_OLD_{k}" ; '
                      f"export {k} ; unset _MLPROBE_OLD_{k} ; else unset {k} ; fi")
    unsets += ["        unset _MLPROBE_ENV_ACTIVE", "    fi", "    " + END]
    return "\n".join(sets) + "\n", "\n".join(unsets) + "\n"


def fish_block(env: Dict[str, str], prepend: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    prepend = {k: v for k, v in (prepend or {}).items() if k not in env}
    sets = [BEGIN]
    for k, v in env.items():
        sets.append(f"if not set -q {k}; set -gx {k} {_fish(v)}; set -gx {_marker(k)} 1; end")
    for k, v in prepend.items():
        sets.append(f"if set -q {k}; set -gx _MLPROBE_OLD_{k} ${k}; end")
        sets.append(f"if set -q {k}; set -gx {k} {_fish(v)}:${k}; else; set -gx {k} {_fish(v)}; end")
    sets += ["set -gx _MLPROBE_ENV_ACTIVE 1", END]
    unsets = ["    " + BEGIN, "    if set -q _MLPROBE_ENV_ACTIVE"]
    for k in env:
        unsets.append(f"        if set -q {_marker(k)}; set -e {k}; set -e {_marker(k)}; end")
    for k in prepend:
        unsets.append(f"        if set -q _MLPROBE_OLD_{k}; set -gx {k} $_MLPROBE_OLD_{k}; "
                      f"set -e _MLPROBE_OLD_{k}; else; set -e {k}; end")
    unsets += ["        set -e _MLPROBE_ENV_ACTIVE", "    end", "    " + END]
    return "\n".join(sets) + "\n", "\n".join(unsets) + "\n"


def csh_block(env: Dict[str, str], prepend: Optional[Mapping[str, str]] = None) -> str:
    lines = [BEGIN] + [f"if (! $?{k}) setenv {k} {_sh(v)}" for k, v in env.items()]
    for k, v in (prepend or {}).items():
        if k not in env:
            lines.append(f'if ($?{k}) then\n    setenv {k} {_sh(v)}":${{{k}}}"\nelse\n    setenv {k} {_sh(v)}\nendif')
    lines.append(END)
    return "\n".join(lines) + "\n"


def ps1_block(env: Dict[str, str]) -> Tuple[str, str]:
    sets = [BEGIN] + [f"if (-not (Test-Path env:{k})) {{ $env:{k} = {_ps(v)}; $env:{_marker(k)} = '1' }}"
                      for k, v in env.items()] + [END]
    unsets = ["    " + BEGIN]
    unsets += [f"    if (Test-Path env:{_marker(k)}) {{ Remove-Item -Path env:{k} -ErrorAction SilentlyContinue; "
               f"Remove-Item -Path env:{_marker(k)} -ErrorAction SilentlyContinue }}" for k in env]
    unsets.append("    " + END)
    return "\n".join(sets) + "\n", "\n".join(unsets) + "\n"


def bat_blocks(env: Dict[str, str]) -> Tuple[str, str]:
    """(activate.bat's lines, deactivate.bat's lines): one plain line each, no parenthesised blocks
    (a value's parenthesis would end one) and no `&` chains."""
    sets = [REM_BEGIN]
    for k, v in env.items():
        sets.append(f'if not defined {k} set "{_marker(k)}=1"')
        sets.append(f'if defined {_marker(k)} set "{k}={_bat(v)}"')
    sets.append(REM_END)
    unsets = [REM_BEGIN]
    for k in env:
        unsets.append(f'if defined {_marker(k)} set "{k}="')
        unsets.append(f'set "{_marker(k)}="')
    unsets.append(REM_END)
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
        elif name in ("activate.bat", "deactivate.bat"):
            block = bat_blocks(env)[0 if name == "activate.bat" else 1]
            text = _append(text.replace("\r\n", "\n"), block).replace("\n", "\r\n")
        out[name] = text
    return out


SCRIPT_NAMES = ("activate", "activate.fish", "activate.csh", "Activate.ps1", "activate.bat", "deactivate.bat")


def activate_scripts(scripts_dir: Path) -> List[Path]:
    return [scripts_dir / n for n in SCRIPT_NAMES if (scripts_dir / n).is_file()]


def write_env(scripts_dir: Path, env: Dict[str, str], prepend: Optional[Mapping[str, str]] = None) -> List[Path]:
    """Write env (and `prepend`: folders put first on path-list variables) into every activate
    script found in scripts_dir; returns those written. Each script is read back: a value that does
    not come back as given is an error, never a setting reported as written."""
    check_values(dict(env, **dict(prepend or {})))
    paths = activate_scripts(scripts_dir)
    olds = {p.name: p.read_bytes().decode("utf-8", "replace") for p in paths}
    news = render_scripts(env, olds, prepend)
    written = []
    for p in paths:
        if news[p.name] != olds[p.name]:
            p.write_bytes(news[p.name].encode("utf-8"))
            written.append(p)
    for p in paths:
        text = p.read_bytes().decode("utf-8", "replace")
        if p.name == "deactivate.bat":  # it only clears: each variable's line must be there
            lines = {ln.strip() for ln in _block_of(text.replace("\r\n", "\n"), REM_BEGIN, REM_END)}
            back = {k: v for k, v in env.items() if f'if defined {_marker(k)} set "{k}="' in lines}
        else:
            back = parse_block(p.name, text)
        if back != dict(env):
            wrong = sorted(k for k in set(env) | set(back) if env.get(k) != back.get(k))
            raise StageError(f"{p} does not read back the settings written into it",
                             why=f"{', '.join(wrong)} differ", next_step="check the file (edited while "
                             "writing?) and run the install again", ref="E566", kind="failure")
    return written


def shell_lines(env: Dict[str, str]) -> List[str]:
    """What to type by hand (for --system, where there is no activate script to carry them)."""
    return [f"export {k}={_sh(v)}" for k, v in env.items()]


_SH_VALUE = r"'((?:[^']|'\\'')*)'"
_POSIX_SET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=" + _SH_VALUE + "$")  # before settings deferred to the person
_POSIX_IF_UNSET = re.compile(r'^if \[ -z "\$\{([A-Za-z_][A-Za-z0-9_]*)\+_\}" \] ; then \1=' + _SH_VALUE + " ; export ")
_POSIX_PREPEND = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=" + _SH_VALUE + r"\"\$\{\1:\+:\$\1\}\"$")
_FISH_SET = re.compile(r"^if not set -q ([A-Za-z_][A-Za-z0-9_]*); set -gx \1 '((?:[^'\\]|\\.)*)'; ")
_CSH_SET = re.compile(r"^if \(! \$\?([A-Za-z_][A-Za-z0-9_]*)\) setenv \1 " + _SH_VALUE + "$")
_PSQ = "'\u2018\u2019\u201a\u201b"
_PS_SET = re.compile(r"^if \(-not \(Test-Path env:([A-Za-z_][A-Za-z0-9_]*)\)\) \{ \$env:\1 = "
                     rf"[{_PSQ}]((?:[^{_PSQ}]|[{_PSQ}]{{2}})*)[{_PSQ}]; ")
_BAT_SET = re.compile(r'^if defined _MLPROBE_SET_([A-Za-z_][A-Za-z0-9_]*) set "\1=(.*)"$')


def _unsh(v: str) -> str:
    return v.replace("'\\''", "'")


def _unfish(v: str) -> str:
    return re.sub(r"\\(.)", r"\1", v)


def _block_of(text: str, begin: str, end: str) -> List[str]:
    text = text.replace("\r\n", "\n")
    start = text.rfind("\n" + begin + "\n")
    if start < 0:
        return []
    stop = text.find("\n" + end, start + 1)
    return text[start:stop if stop > 0 else len(text)].splitlines()


def parse_block(name: str, text: str) -> Dict[str, str]:
    """The settings mlprobe's block in one activate script sets (name -> value), for every flavour
    it writes: how a write is checked, and what doctor reads."""
    out: Dict[str, str] = {}
    if name == "deactivate.bat":
        return {}
    if name == "activate.bat":
        for line in _block_of(text, REM_BEGIN, REM_END):
            m = _BAT_SET.match(line.strip())
            if m:
                out[m.group(1)] = m.group(2).replace("%%", "%")
        return out
    for line in _block_of(text, BEGIN, END):
        line = line.strip()
        if name == "activate":
            m = _POSIX_IF_UNSET.match(line) or _POSIX_SET.match(line)
            if m:
                out[m.group(1)] = _unsh(m.group(2))
        elif name == "activate.fish":
            m = _FISH_SET.match(line)
            if m:
                out[m.group(1)] = _unfish(m.group(2))
        elif name == "activate.csh":
            m = _CSH_SET.match(line)
            if m:
                out[m.group(1)] = _unsh(m.group(2))
        elif name == "Activate.ps1":
            m = _PS_SET.match(line)
            if m:
                out[m.group(1)] = re.sub(f"([{_PSQ}])\\1", r"\1", m.group(2))
    return out


def read_prepend(scripts_dir: Path) -> Dict[str, str]:
    """The folders mlprobe's block of bin/activate puts first on path-list variables."""
    try:
        text = (scripts_dir / "activate").read_bytes().decode("utf-8", "replace")
    except OSError:
        return {}
    out: Dict[str, str] = {}
    for line in _block_of(text, BEGIN, END):
        m = _POSIX_PREPEND.match(line.strip())
        if m:
            out[m.group(1)] = _unsh(m.group(2))
    return out


def read_env(scripts_dir: Path) -> Dict[str, str]:
    """The variables mlprobe wrote into this environment's bin/activate (its marked block), so that
    a later check or `mlprobe verify --python --activated` runs with what activating the venv gives.
    {} when there is no such block or the script cannot be read."""
    try:
        text = (scripts_dir / "activate").read_bytes().decode("utf-8", "replace")
    except OSError:
        return {}
    return parse_block("activate", text)


def activated_env(base: Mapping[str, str], venv: Optional[Path], scripts_dir: Optional[Path],
                  env: Mapping[str, str], prepend: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """`base` as activating the venv changes it: VIRTUAL_ENV, its scripts first on PATH, no
    PYTHONHOME, the recipe's variables where `base` does not set them (a value the person set wins,
    as in activate and the start-up hook), and the folders `prepend` puts first on path-list variables."""
    out = dict(base)
    if venv is not None and scripts_dir is not None:
        out["VIRTUAL_ENV"] = str(venv)
        out["PATH"] = str(scripts_dir) + os.pathsep + out.get("PATH", "")
        out.pop("PYTHONHOME", None)
    for k, v in env.items():
        out.setdefault(str(k), str(v))
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
