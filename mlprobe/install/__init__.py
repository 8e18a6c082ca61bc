"""`mlprobe install`: a plan's recommendation turned into exact steps, resolved without installing,
and (with --apply) carried out transactionally in a virtual environment.

Modules, in the order the command uses them:
  steps.py        recommendation -> InstallPlan (packages, sources, env vars, files, shims, steps)
  venv.py         interpreters: find python X.Y, inspect one (and list its distributions),
                  create/reuse a venv, PEP 668 refusal
  index.py        does an index answer, and serve a wheel this interpreter can install (PEP 691/503)
  resolve.py      `pip install --dry-run --report -`: what would land, versions, sizes; pip errors
  backends.py     pip and uv command lines, and where packages come from (Sources)
  transaction.py  snapshot an environment, restore it (or remove a new venv) on any failure
  activate.py     the recipe's env vars written into the venv's activate scripts
  proc.py         child processes with timeouts, Ctrl-C forwarding, and the transcript log
  preflight.py    the pre-flight: target, pins, index checks, the dry run by the installer --apply runs
  apply.py        the --apply sequence: venv, install, activate scripts, device check, verify
"""
