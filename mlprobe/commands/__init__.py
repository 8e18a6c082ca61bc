"""One module per command; see mlprobe/cli.py."""
