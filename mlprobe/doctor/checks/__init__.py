"""The doctor's checks, one function per `test` of knowledge/doctor.json, one module per family. A
check reads the DoctorContext and returns its hits (the placeholders of the rule's title and fix, and
the evidence), an empty list when the link is sound, or `Unknown` when the captures cannot tell.
Importing the package registers every family's checks in CHECKS."""

from __future__ import annotations

from . import amd, build, environment, frameworks, libraries, nvidia, opencl, visibility  # noqa: F401 (registers)
from ._base import CHECKS as CHECKS, Check as Check, Hit as Hit, Result as Result, Unknown as Unknown
from .amd import _override_gfx as _override_gfx
from .visibility import _visible as _visible
