"""`mlprobe export`: what mlprobe decided for a machine (the build index, the pins, the settings, the
machine's own facts), written for the tools people keep their projects in: uv's pyproject.toml,
pixi's manifest, conda's virtual-package overrides and environment.yml, wheel-variant properties."""
