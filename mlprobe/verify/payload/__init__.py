# mypy: ignore-errors
# The verify payload: a package of files run in the TARGET interpreter (see __main__.py), never
# imported by mlprobe at run time except its harness (settings and tolerances). Empty on purpose: the
# child loads it as the private package `_mlprobe_payload`, and must import nothing it does not need.
