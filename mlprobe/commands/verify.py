"""`mlprobe verify`: train a tiny CNN on each usable device of the target interpreter and say, with
figures, whether the accelerator is correct, learns, and beats the CPU. Progress goes to stderr;
`--json` prints only the result document on stdout. Exit codes: 0 verified, 1 wrong results,
3 nothing usable to verify (mlprobe.errors)."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from ..errors import EXIT_UNAVAILABLE, MlprobeError
from ..model.vocabulary import vocabulary
from .common import device, print_json, seconds


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("verify", help="prove (or disprove) that a framework really uses the accelerator")
    p.add_argument("--framework", default="any", choices=("any",) + vocabulary().verify_choices(),
                   help="framework to verify (default: every one installed in the target python; "
                        "keras = plaidml-keras where installed, else TensorFlow)")
    p.add_argument("--device", metavar="DEVICE", type=device,
                   help="device to verify: cpu, cuda, cuda:1, rocm, mps, xpu, directml, gpu, metal, or a "
                        "PlaidML id such as llvm_cpu.0 (default: every usable device; the CPU always runs "
                        "as the baseline)")
    p.add_argument("--python", metavar="PATH",
                   help="the path of an interpreter whose frameworks to verify (default: the one running "
                        "mlprobe)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--quick", action="store_true", help="fewer speed repeats and a shorter learning budget")
    p.add_argument("--timeout", type=seconds, default=600.0, metavar="S",
                   help="limit for each child process in seconds (default 600)")
    p.add_argument("--baseline-python", action="append", default=None, metavar="PATH",
                   help="another interpreter whose frameworks' CPU speed joins the best-CPU figure "
                        "(repeatable; default: the one running mlprobe, when --python names another)")
    p.add_argument("--activated", action="store_true",
                   help="run the interpreter as a shell where its venv is activated has it (default: as it starts "
                        "plainly, from an IDE, Jupyter, cron or `uv run`: no activate, its start-up hook only)")
    p.add_argument("--no-cpu-peers", action="store_true",
                   help="don't measure the CPU speed of frameworks that are not being verified")
    p.set_defaults(func=run)


def _start_note(target: str, activated: bool) -> Optional[str]:
    """One line on how the target's venv gets its settings in this run, and what is missing when its
    start-up hook is off or absent."""
    import os

    from ..doctor.starts import venv_of
    from ..venvconf import hook
    from ..venvconf.layout import read_settings

    venv = venv_of(target)
    if venv is None:
        return None
    st = read_settings(venv)
    wanted = st.wanted()
    if not wanted:
        return None
    how = "as a shell where it is activated has it" if activated else \
        "as it starts without activate (an IDE, Jupyter, cron, `uv run`)"
    missing = [k for k in wanted if k not in os.environ]
    if not activated and hook.hook_off(os.environ) and missing:
        return (f"verify runs {target} {how}; its start-up hook is off (MLPROBE_HOOK={os.environ.get('MLPROBE_HOOK')}), "
                f"so {', '.join(missing)} (the recipe's settings) are not set: a device that needs them is not seen")
    if not activated and (st.hook is None or not st.hook.pth) and missing:
        return (f"verify runs {target} {how}; only its activate scripts set {', '.join(missing)}, so this start "
                "does not get them (`mlprobe install --settings-only --venv VENV --recipe R` adds the start-up hook)")
    return f"verify runs {target} {how}; the start-up hook sets {', '.join(wanted)} where unset"


def run(args: argparse.Namespace) -> int:
    from ..render.verify_terminal import Progress, render_verify
    from ..verify.runner import resolve_python, verify

    import os

    from ..venvconf.activate import env_of_interpreter

    target = resolve_python(args.python)
    env: "dict[str, str]" = {}
    said = _start_note(target, args.activated)
    if args.activated:
        # as after `activate`: the variables its block sets, unless already set by hand
        env = {k: v for k, v in env_of_interpreter(target, os.environ).items()
               if k in ("VIRTUAL_ENV", "PATH") or k not in os.environ}
    else:
        # as an IDE, Jupyter, cron or `uv run` start it: without what activating its venv added here
        from ..doctor.starts import plain_base, venv_of

        venv = venv_of(target)
        if venv is not None:
            plain = plain_base(os.environ, venv)
            for k in [k for k in os.environ if k not in plain]:
                del os.environ[k]
            os.environ.update(plain)
    if said:
        print(said, file=sys.stderr)
    baselines = args.baseline_python
    if baselines is None:
        baselines = [sys.executable] if args.python else []
    progress = Progress()
    try:
        result = verify(python=target, framework=args.framework, device=args.device, timeout=args.timeout,
                        quick=args.quick, baseline_pythons=baselines, cpu_peers=not args.no_cpu_peers,
                        on_event=progress.event, env=env)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        # The payload answers from another interpreter; an answer of shapes it never sends (a
        # sitecustomize printing on stdout, an interpreter that is not Python) is not a traceback.
        raise MlprobeError(
            f"the verify probe in {target} answered in a form mlprobe cannot read",
            why=f"{type(exc).__name__}: {exc}",
            next_step="run it with the interpreter of a normal Python environment, "
                      "e.g. `--python .venv/bin/python`",
            ref="E604", exit_code=EXIT_UNAVAILABLE) from None
    finally:
        progress.stop()
    doc = result.to_json()
    if said:
        doc["environment"] = said
    if args.json:
        print_json(doc)
    else:
        render_verify(doc)
    return result.exit_code
