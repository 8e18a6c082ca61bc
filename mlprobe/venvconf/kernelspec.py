"""A Jupyter kernel spec for the venv: `V/share/jupyter/kernels/<name>/kernel.json`, whose `env` carries
the recipe's settings and whose display name says which build it is ("Python (mlprobe: torch ROCm 7.14)").

Jupyter finds kernel specs in `share/jupyter/kernels` under each folder of its data path, and
`sys.prefix` of the environment it runs in is one of them, so `jupyter kernelspec list` from that
venv shows the spec; a JupyterLab that lives in another environment finds it at the user level
(`--user-kernel`), under the folder jupyter_core names: $JUPYTER_DATA_DIR, else
~/.local/share/jupyter (Linux: $XDG_DATA_HOME/jupyter), ~/Library/Jupyter (macOS), %APPDATA%\\jupyter
(Windows). The kernel is started by its `argv`; jupyter_client (7+) puts `env` over the server's own
environment, substituting `${NAME}` from it, so a folder prepended to LD_LIBRARY_PATH keeps the rest.

A spec mlprobe wrote carries `metadata.mlprobe` (the recipe and the venv); one without it is the
person's own and is never replaced or removed.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from ..errors import StageError

KERNELS = Path("share") / "jupyter" / "kernels"
SPEC = "kernel.json"
_SAFE = re.compile(r"[^a-z0-9._-]+")


def kernel_name(recipe: str) -> str:
    """Jupyter's rule for names: ASCII letters, digits, '.', '_' and '-'."""
    return "mlprobe-" + (_SAFE.sub("-", recipe.lower()).strip("-") or "env")


def user_data_dir(env: Mapping[str, str], platform: str = sys.platform, home: Optional[Path] = None) -> Path:
    """jupyter_core.paths.jupyter_data_dir(), for a mlprobe that does not have jupyter_core."""
    if env.get("JUPYTER_DATA_DIR"):
        return Path(env["JUPYTER_DATA_DIR"]).expanduser()
    home = home or Path(env.get("HOME") or os.path.expanduser("~"))
    if platform == "darwin":
        return home / "Library" / "Jupyter"
    if platform.startswith("win"):
        appdata = env.get("APPDATA")
        return Path(appdata) / "jupyter" if appdata else home / ".jupyter" / "data"
    xdg = env.get("XDG_DATA_HOME") or str(home / ".local" / "share")
    return Path(xdg) / "jupyter"


def spec_document(python: str, display: str, env: Mapping[str, str], prepend: Mapping[str, str],
                  recipe: str, venv: Path) -> Dict[str, object]:
    full = {k: v for k, v in env.items()}
    for k, v in prepend.items():
        full.setdefault(k, v + os.pathsep + "${" + k + "}")
    return {"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": display, "language": "python", "env": full,
            "metadata": {"debugger": True, "mlprobe": {"recipe": recipe, "venv": str(venv)}}}


def read_spec(path: Path) -> Optional[Dict[str, object]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def is_ours(doc: Optional[Dict[str, object]]) -> bool:
    meta = doc.get("metadata") if doc else None
    return isinstance(meta, dict) and isinstance(meta.get("mlprobe"), dict)


def spec_env(doc: Optional[Dict[str, object]]) -> Dict[str, str]:
    env = doc.get("env") if doc else None
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def refuse_foreign(folder: Path) -> None:
    """A kernel spec in `folder` that mlprobe did not write is the person's: refused."""
    path = folder / SPEC
    if os.path.lexists(path) and not is_ours(read_spec(path)):
        raise StageError(f"{path} is a kernel spec mlprobe did not write: it is left as it is",
                         next_step="remove or rename that kernel, or leave out the kernel options",
                         ref="E565", kind="usage")


def write_spec(folder: Path, doc: Dict[str, object]) -> Path:
    """Write kernel.json into `folder` (made when missing). A spec there that mlprobe did not write
    is the person's: refused, nothing written."""
    path = folder / SPEC
    refuse_foreign(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    if read_spec(path) != json.loads(text):
        raise StageError(f"{path} did not read back as written", ref="E566", kind="failure")
    return path


def our_specs(root: Path, venv: Optional[Path] = None) -> List[Path]:
    """kernel.json files under `root`/share/jupyter/kernels (or `root` itself when it is a kernels
    folder) that mlprobe wrote (for `venv`, when named)."""
    base = root if root.name == "kernels" else root / KERNELS
    out = []
    try:
        folders = sorted(p for p in base.iterdir() if p.is_dir())
    except OSError:
        return []
    for folder in folders:
        doc = read_spec(folder / SPEC)
        if not is_ours(doc):
            continue
        assert doc is not None
        meta = doc["metadata"]
        assert isinstance(meta, dict)
        mine = meta["mlprobe"]
        if venv is not None and isinstance(mine, dict) and \
                os.path.normcase(str(mine.get("venv", ""))) != os.path.normcase(str(venv)):
            continue
        out.append(folder / SPEC)
    return out


__all__ = ["KERNELS", "SPEC", "kernel_name", "user_data_dir", "spec_document", "read_spec", "is_ours", "refuse_foreign",
           "spec_env", "write_spec", "our_specs"]
