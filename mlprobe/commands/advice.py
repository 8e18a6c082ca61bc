"""The command layer's half of an error: a narrow exception from library code becomes the
MlprobeError a person sees (stable reference, why, next step, exit code). Library code says what went
wrong; only here is it decided what a person should do about it and which exit status it is."""

from __future__ import annotations

from ..errors import EXIT_FAILURE, EXIT_USAGE, LibraryError, MlprobeError, StageError, exit_status


def advice(exc: LibraryError) -> MlprobeError:
    from ..scan.run import BadOverride
    from ..urls import BadIndexLocation

    if isinstance(exc, StageError):
        return MlprobeError(exc.what, why=exc.why, next_step=exc.next_step, ref=exc.ref,
                            exit_code=exit_status(exc.kind))
    if isinstance(exc, BadIndexLocation):
        if exc.missing_folder is not None:
            import os

            what = "a file, not a folder" if os.path.exists(exc.missing_folder) else "a folder that does not exist"
            return MlprobeError(f"{exc.where} points at {what}: {exc.missing_folder}",
                                why=exc.why, next_step="check the path, or pass the URL of an index over http(s)",
                                ref="E517", exit_code=EXIT_USAGE)
        return MlprobeError(
            f"{exc.where} is not a usable index location: {exc.url!r}", why=exc.why,
            next_step="give an http://, https:// or file:// URL of a package index (PEP 503: the folder "
                      "that holds one page per project), e.g. https://mirror.example/whl/cpu",
            ref="E517", exit_code=EXIT_USAGE)
    if isinstance(exc, BadOverride):
        return MlprobeError(f"invalid override {exc.key}={exc.value!r} ({exc.where})", why=exc.why,
                            next_step=f"fix or remove {exc.key} ({exc.where})", ref="E004", exit_code=EXIT_USAGE)
    return MlprobeError(str(exc), ref="E000", exit_code=EXIT_FAILURE)
