"""`mlprobe completion bash|zsh|tcsh`: a shell completion script, generated from the parser.

shtab writes a static script once (`mlprobe completion bash > ~/.local/share/bash-completion/
completions/mlprobe`), so pressing TAB never starts Python; argcomplete instead runs the program on
every TAB press, which would import every command module each time and needs a marker in the entry
point. shtab is only imported by this command."""

from __future__ import annotations

import argparse
import sys

SHELLS = ("bash", "zsh", "tcsh")


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "completion", help="print a shell completion script (bash, zsh, tcsh)",
        description="Print a completion script for your shell. bash: "
                    "`mlprobe completion bash > ~/.local/share/bash-completion/completions/mlprobe`; "
                    "zsh: `mlprobe completion zsh > ~/.zfunc/_mlprobe` (with ~/.zfunc on fpath).")
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..cli import build_parser
    from ..errors import EXIT_UNAVAILABLE, MlprobeError

    try:
        import shtab
    except ImportError:
        raise MlprobeError("shell completion needs the shtab package", why="it is not installed here",
                           next_step="python -m pip install shtab", ref="E003",
                           exit_code=EXIT_UNAVAILABLE) from None
    parser = build_parser()
    _complete_recipe_ids(parser)
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return 0


# options that take a recipe id: the script offers the ids and aliases of every recipe
RECIPE_OPTIONS = ("--recipe", "--why-not")


def _complete_recipe_ids(parser: argparse.ArgumentParser) -> None:
    """Give the recipe options of this parser (built for the script alone) the recipe ids as their
    choices, which shtab writes into the script as the words to complete."""
    from ..recipes import load_recipes

    ids = sorted({r.id for r in load_recipes()} | {a for r in load_recipes() for a in r.aliases})
    stack = [parser]
    while stack:
        p = stack.pop()
        for action in p._actions:
            if any(o in RECIPE_OPTIONS for o in action.option_strings):
                action.choices = ids
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
