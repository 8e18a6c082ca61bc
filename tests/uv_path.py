"""Where the tests find uv.

`.ci/run` installs uv into a venv of its own and names it in MLPROBE_TEST_UV, so that the uv tests run
in CI while every other test still sees pip alone on PATH (install picks uv whenever it is on PATH).
Elsewhere: uv on PATH, else beside this interpreter.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Optional


def find_uv() -> Optional[str]:
    for candidate in (os.environ.get("MLPROBE_TEST_UV"), shutil.which("uv"), str(Path(sys.executable).with_name("uv"))):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


UV = find_uv()
UV_DIR = os.path.dirname(UV) if UV else None
