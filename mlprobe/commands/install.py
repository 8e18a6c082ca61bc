"""`mlprobe install`: the plan's steps, resolved and checked without installing; `--apply` installs
them into a virtual environment, transactionally, then verifies."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..model.vocabulary import vocabulary

if TYPE_CHECKING:
    from ..install.steps import InstallOptions
    from ..model.facts import ScanReport
    from ..model.plan import Recommendation

from .common import add_replay, refuse_overwriting_an_input, replay_inputs, seconds

SOURCES_HELP = """\
where packages come from:
  By default the recipe's own index is the only source: PyTorch's wheel index for its builds
  (https://download.pytorch.org/whl/<cpu|cuXYZ|rocmX.Y|xpu>, or the mirror named by
  MLPROBE_PYTORCH_INDEX_URL), the Python Package Index (pip's default index) for the rest. It
  replaces the index-url, extra-index-url and find-links of pip's configuration, so that no other
  build of the same package can slip in; pip's other settings (proxy, cert, timeout, constraints)
  still apply. Before anything is written the index is asked for each package: if it does not
  answer, mlprobe stops (exit 3) and says which option to use. It never switches sources by itself.
  --index-url URL     your index (a mirror) replaces the recipe's (http, https or file URLs).
  --find-links DIR    adds a folder of wheels (repeatable); with --no-index, only those folders.
  --use-pip-config    mlprobe passes no source: pip's own configuration (pip.conf, PIP_* variables,
                      find-links and extra indexes included) decides. Uses pip, not uv. For a recipe
                      whose index is a build variant (torch +cpu, +cu126, +rocm6.2), mlprobe pins the
                      newest build with that label that those sources have (e.g. torch==2.13.0+cpu)
                      and refuses when they have none.

  Offline or air-gapped:  mlprobe install --apply --no-index --find-links /path/to/wheels
  Behind a mirror:        mlprobe install --apply --index-url https://mirror.example/simple
  A PyTorch mirror:       MLPROBE_PYTORCH_INDEX_URL=https://mirror.example/whl mlprobe install --apply
  pip.conf knows best:    mlprobe install --apply --use-pip-config

Without --apply nothing is written to disk: the steps are printed, each index is checked, and pip
resolves the packages with --dry-run (no cache) to show what would land.

exit codes: 0 installed (and verified) / steps shown and resolvable; 1 the install or its checks
failed (the environment was restored); 2 usage (a bad option, URL or recipe); 3 nothing to do
(no recipe fits, an index does not answer, no build for this Python); 130 interrupted."""


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "install", help="the exact install steps for the recommended stack; --apply carries them out",
        description="Print the plan's install steps, check the indexes and resolve the packages without "
                    "installing. With --apply: install into a virtual environment (restored or removed "
                    "if anything fails), write the recipe's env vars into its activate scripts, then verify.",
        epilog=SOURCES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", choices=("any",) + vocabulary().plan_frameworks(), default="any",
                   help="which framework the recommendation is for (default: any)")
    p.add_argument("--recipe", metavar="ID", help="a recipe from `mlprobe plan` instead of the first one")
    p.add_argument("--recipe-file", metavar="FILE", type=Path,
                   help="a recipe as JSON (one entry of `mlprobe plan --json`'s recommended list, or a whole "
                        "plan); skips the scan")
    p.add_argument("--python", metavar="X.Y|PATH",
                   help="a version X.Y (pythonX.Y on PATH, or a pyenv install) or the path of an interpreter: "
                        "the Python the new environment is made with")
    p.add_argument("--from-lock", metavar="FILE", type=Path,
                   help="install exactly the files of a pylock.toml (from `install --apply` or `mlprobe bundle`), "
                        "their sha256 checked; the stack it was made for is set up and verified")
    p.add_argument("--unpin", metavar="VENV", type=Path,
                   help="lift the build pins mlprobe keeps in that venv (pip and uv may replace the build again)")
    p.add_argument("--detach", metavar="VENV", type=Path,
                   help="remove everything mlprobe added to that venv (start-up hook, kernel specs, activate "
                        "blocks, pins, launcher, loader fixes) and keep its packages")
    add_replay(p)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    src = p.add_argument_group("sources (see below)")
    src.add_argument("--index-url", metavar="URL", help="use this index instead of the recipe's")
    src.add_argument("--extra-index-url", metavar="URL", action="append", default=[],
                     help="another index next to it (repeatable)")
    src.add_argument("--find-links", metavar="DIR", action="append", default=[],
                     help="a folder (or page) of wheels to install from (repeatable)")
    src.add_argument("--no-index", action="store_true", help="no index at all: only --find-links")
    src.add_argument("--use-pip-config", action="store_true",
                     help="let pip's own configuration choose where packages come from (pip.conf, PIP_*)")
    ap = p.add_argument_group("applying")
    ap.add_argument("--apply", action="store_true", help="install (nothing is written without it)")
    ap.add_argument("--venv", metavar="PATH", type=Path,
                    help="the venv to create, or an existing one to reuse (default: ./mlprobe-<recipe>-venv)")
    ap.add_argument("--force", action="store_true",
                    help="allow a --venv in a system location (/etc, /usr, C:\\Windows, …), refused otherwise; "
                         "replace a start-up hook edited by hand")
    ap.add_argument("--settings-only", action="store_true",
                    help="write only the recipe's settings (start-up hook, activate scripts, kernel spec) into "
                         "an existing venv (--venv, else the active one), e.g. the .venv `uv sync` made; "
                         "installs nothing")
    kern = ap.add_mutually_exclusive_group()
    kern.add_argument("--kernel", dest="kernel", action="store_const", const=True, default=None,
                      help="write a Jupyter kernel spec into the venv even without ipykernel there "
                           "(default: when the venv has ipykernel)")
    kern.add_argument("--no-kernel", dest="kernel", action="store_const", const=False,
                      help="no Jupyter kernel spec")
    ap.add_argument("--user-kernel", action="store_true",
                    help="the kernel spec also at the user level, for a JupyterLab in another environment")
    ap.add_argument("--recover", action="store_true",
                    help="roll back installs that were killed mid-way (kill -9, a closed terminal), then stop; "
                         "an --apply into the same target does this by itself first")
    ap.add_argument("--system", action="store_true",
                    help="install into the interpreter itself "
                         "(refused when it is externally managed, PEP 668)")
    ap.add_argument("--installer", choices=["auto", "pip", "uv"], default="auto",
                    help="auto: uv when it is on PATH, else pip")
    ap.add_argument("--without-pip", action="store_true",
                    help="create the venv without pip (faster; mlprobe drives it with this pip's --python)")
    ap.add_argument("--no-verify", action="store_true", help="skip `mlprobe verify` after installing")
    ap.add_argument("--keep-without-device", action="store_true",
                    help="keep the environment even when its framework does not list the recipe's device "
                         "(rolled back otherwise); said in the result")
    ap.add_argument("--log", metavar="FILE", type=Path,
                    help="the transcript log (default: ~/.cache/mlprobe/logs/install-<recipe>-<time>.log)")
    ap.add_argument("--timeout", metavar="S", type=seconds, default=3600.0,
                    help="limit for the install command itself (default 3600 s)")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace) -> "InstallOptions":
    from ..install.steps import InstallOptions

    return InstallOptions(
        framework=args.framework, recipe=args.recipe, python=args.python,
        index_url=args.index_url, extra_index_urls=tuple(args.extra_index_url),
        find_links=tuple(_abs_link(x) for x in args.find_links), no_index=args.no_index,
        use_pip_config=args.use_pip_config, apply=args.apply, venv=args.venv, system=args.system,
        installer=args.installer, with_pip=not args.without_pip, verify=not args.no_verify,
        log=args.log, timeout_s=args.timeout, keep_without_device=args.keep_without_device,
        kernel=args.kernel, user_kernel=args.user_kernel, force=args.force,
    )


def _abs_link(x: str) -> str:
    """A folder given relative to the cwd stays right whatever directory pip runs in."""
    if "://" in x:
        return x
    return str(Path(x).expanduser().absolute())


RECIPE_FILE_MAX_BYTES = 16 * 1024 * 1024


def _device_of_this_machine(rec: "Recommendation", args: argparse.Namespace) -> "Recommendation":
    """A lock carries the packages, and the device the recipe chose on the machine it was made for
    (`mlprobe bundle --replay` of another machine's report). The packages stay; the device, and what
    names it (PLAIDML_DEVICE_IDS, the settings file, verify's target), come from this machine's own
    plan of the same recipe, and a change is said."""
    import dataclasses

    from .. import pipeline, ui
    from .common import make_host

    try:
        host = make_host(args)
        plan = pipeline.plan(pipeline.scan_report(host, None), framework=rec.framework or "any", env=os.environ)
    except Exception as exc:  # the lock's own choice stays; the device check will judge it
        ui.note(f"could not plan {rec.recipe} for this machine ({type(exc).__name__}): the lock's device "
                f"{ui.safe_line(rec.device or '')} is kept")
        return rec
    here = next((r for r in plan.recommended if r.recipe == rec.recipe), None)
    if here is None or not here.device or here.device == rec.device:
        return rec
    said = (f"the lock was made for {rec.device_name or rec.device} ({rec.device}); on this machine "
            f"{rec.recipe} uses {here.device_name or here.device} ({here.device})")
    ui.note(ui.safe_line(said))
    return dataclasses.replace(rec, device=here.device, device_name=here.device_name, env=here.env,
                               files=here.files, verify=here.verify, notes=tuple(rec.notes) + (said,))


def _recommendation(args: argparse.Namespace) -> "tuple[Recommendation, Optional[ScanReport], bool]":
    """(the typed recommendation, scan report or None, replayed?)"""
    import json

    from ..errors import EXIT_USAGE, MlprobeError
    from ..install.steps import pick_recommendation, recommendation_from_file

    if getattr(args, "from_lock", None):
        from .lock import recommendation_from_lock

        rec = recommendation_from_lock(args.from_lock)
        if rec.device and not getattr(args, "replay", None):
            rec = _device_of_this_machine(rec, args)
        return rec, None, False
    if args.recipe_file:
        from ..scan.capture import UnreadableFile, read_regular

        try:
            # a regular file only, capped: `--recipe-file /dev/zero` or a FIFO must not hang
            raw = read_regular(args.recipe_file, RECIPE_FILE_MAX_BYTES + 1)
            if len(raw) > RECIPE_FILE_MAX_BYTES:
                raise ValueError(f"it is larger than {RECIPE_FILE_MAX_BYTES >> 20} MiB")
            doc = json.loads(raw.decode("utf-8"))
        except (OSError, UnreadableFile, ValueError, RecursionError) as exc:
            raise MlprobeError(f"cannot read the recipe file {args.recipe_file}", why=str(exc),
                               next_step="pass a JSON file: one recommendation, or a plan from "
                                         "`mlprobe plan --json`",
                               ref="E513", exit_code=EXIT_USAGE) from None
        if isinstance(doc, dict) and "recommended" in doc:
            return pick_recommendation(doc, args.recipe), None, False
        if not isinstance(doc, dict):
            raise MlprobeError(f"{args.recipe_file} is not a recipe", why="expected a JSON object",
                               next_step="see `mlprobe install --help`", ref="E513", exit_code=EXIT_USAGE)
        return recommendation_from_file(doc), None, False
    from .. import pipeline
    from .common import host_source, make_host

    host = make_host(args)
    from ..install.steps import pick

    report = pipeline.scan_report(host, host_source(host, args))
    plan = pipeline.plan(report, framework=args.framework, python=_plan_python(args.python), env=os.environ,
                         host=host)
    return pick(plan, args.recipe), report, host.kind == "replay"


def _check_log(path: Path) -> None:
    """--log names a file to append to: refused before anything is done when it is a folder or a FIFO
    (opening a FIFO nobody reads would wait for ever, with the target locked)."""
    import os
    import stat

    from ..errors import EXIT_USAGE, MlprobeError

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # created (with its folders) when the install starts
    what = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else None)
    if what:
        raise MlprobeError(f"--log {path} is {what}", why="the transcript is appended to a file",
                           next_step="pass a file name, e.g. --log install.log", ref="E521",
                           exit_code=EXIT_USAGE)


def _overrides(report: "Optional[ScanReport]") -> "dict[str, str]":
    """The MLPROBE_OVERRIDE_* values the scan behind the recommendation applied."""
    return dict(report.overrides) if report is not None else {}


def _plan_python(python: "str | None") -> "str | None":
    """The planner wants X.Y; --python may also name an interpreter."""
    import re

    if not python or re.fullmatch(r"\d+\.\d+", python):
        return python
    from ..install.venv import find_python, inspect_interpreter

    return inspect_interpreter(find_python(python)).major_minor


def _recover_all(args: argparse.Namespace) -> int:
    import sys

    from ..errors import EXIT_OK, StageError
    from ..install.guard import TargetLock, all_journals, journal_path
    from ..install.transaction import recover, unreadable_journal
    from .common import print_json

    wanted = None
    if args.venv:
        wanted = journal_path(str(Path(args.venv).expanduser().absolute()))
    done = []
    problems = []
    for journal in list(all_journals()):
        if wanted and journal.path != wanted:
            continue
        if journal.broken:  # the same refusal an --apply into that target gives
            problems.append(unreadable_journal(journal.path, journal.broken))
            continue
        target = journal.target
        try:  # by the journal's own key: the path may lead elsewhere by now (a symlink re-pointed)
            with TargetLock(target, key=journal.path.name.split(".")[0]):
                what = recover(target, journal=journal.path)
        except StageError as exc:
            problems.append(exc)
            continue
        if what:
            done.append(what)
    if problems:
        for line in done:
            print(line, file=sys.stderr)
        raise problems[0]
    if args.json:
        print_json({"schema": "mlprobe.install-recover/1", "recovered": done})
    else:
        for line in done or ["no interrupted install to roll back"]:
            print(line, file=sys.stderr)
    return EXIT_OK


def _target_of(args: argparse.Namespace, recipe: str) -> str:
    """The lock and journal key, known before the target is looked at."""
    import sys

    from ..install.venv import default_venv_path, find_python

    if args.system:
        return find_python(args.python) if args.python else sys.executable
    return str((args.venv or default_venv_path(recipe)).expanduser().absolute())


def run(args: argparse.Namespace) -> int:
    import contextlib
    import sys

    from ..install.guard import TargetLock, check_location
    from ..install.transaction import recover
    from ..install.steps import build_plan

    if args.recover:
        return _recover_all(args)
    if args.unpin:
        from .lock import unpin_command

        return unpin_command(args)
    if args.detach:
        from .settings import detach_command

        return detach_command(args)
    if args.settings_only:
        from .settings import settings_only_command

        return settings_only_command(args, _options(args), *_recommendation(args))
    if args.log is not None:
        _check_log(Path(args.log))
        inputs = [str(f) for f in (args.recipe_file, args.from_lock) if f is not None] + replay_inputs(args)
        refuse_overwriting_an_input(str(args.log), inputs, "--log")
    opts = _options(args)
    rec, report, replay = _recommendation(args)
    plan = build_plan(rec, opts)
    if replay and (args.apply or args.from_lock):
        from ..errors import EXIT_USAGE, MlprobeError
        from .common import replay_said

        said, drop = replay_said(args)
        if args.from_lock:
            raise MlprobeError(f"--from-lock with {said}", why="a lock is installed on the machine it is for",
                               next_step=drop, ref="E523", exit_code=EXIT_USAGE)
        raise MlprobeError(f"--apply with {said}: the plan is for the captured machine",
                           why="a replayed bundle describes the machine it was captured on",
                           next_step=f"run `mlprobe install --apply` on that machine, or {drop} to install "
                                     "on this one", ref="E512", exit_code=EXIT_USAGE)
    if args.from_lock:
        plan.lock_file = str(Path(args.from_lock).expanduser().absolute())
    overrides = _overrides(report)
    if overrides and not args.json:
        from .. import ui

        print(ui.safe("overridden: " + "; ".join(f"{k}={v}" for k, v in overrides.items())
                      + " (facts set by MLPROBE_OVERRIDE_*, not read from the machine); "
                      f"the recipe {plan.recipe} was chosen for them"), file=sys.stderr)
    guard: "contextlib.AbstractContextManager[object]" = contextlib.nullcontext()
    target = ""
    if args.apply and not replay:
        target = _target_of(args, plan.recipe)
        if not args.system:
            check_location(Path(target), args.force)
        guard = TargetLock(target)
    with guard:
        if args.apply and not replay:
            done = recover(target)
            if done and not args.json:
                print(done, file=sys.stderr)
        elif not replay and not args.json:
            from ..install.guard import read_journal

            if read_journal(_target_of(args, plan.recipe)) is not None:
                print("warning: an install into this target was interrupted and is not rolled back yet; "
                      "`mlprobe install --recover` (or the same command with --apply) rolls it back",
                      file=sys.stderr)
        return _run_locked(args, opts, plan, report, replay)


def _run_locked(args: argparse.Namespace, opts: "object", plan: "object", report: "Optional[ScanReport]",
                replay: bool) -> int:
    from ..errors import EXIT_OK, exit_status
    from ..install.apply import apply, prepare
    from ..model.docversion import schema_id
    from ..render import install_terminal as out
    from .common import print_json

    with out.status_line(enabled=not args.json) as say:
        pre = prepare(plan, opts, report=report, replay=replay, on_progress=say)  # type: ignore[arg-type]
    if not args.apply:
        if args.json:
            print_json({"schema": schema_id("install"), "applied": False, **pre.to_dict(),
                        **({"overrides": _overrides(report)} if _overrides(report) else {})})
        else:
            from .. import ui

            out.render_preflight(pre)
            # an error is an error with or without --apply: on stderr, in the same words
            for problem in pre.problems:
                ui.say_error(problem.render())
        return EXIT_OK if pre.ok else exit_status(pre.problems[0].kind)
    if not args.json:
        out.render_preflight(pre, applying=True)
    if not pre.ok:
        raise pre.problems[0]
    progress = out.ApplyProgress(enabled=not args.json)
    try:
        result = apply(pre, opts, progress)  # type: ignore[arg-type]
    finally:
        progress.close()
    if args.json:
        print_json({"schema": schema_id("install"), "applied": True, **pre.to_dict(),
                    **({"overrides": _overrides(report)} if _overrides(report) else {}),
                    "result": result.to_dict()})
    else:
        out.render_applied(pre, result)
    if result.verify is not None:
        return result.verify.exit_code
    return EXIT_OK
