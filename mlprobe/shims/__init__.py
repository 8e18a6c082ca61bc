"""Compatibility shims mlprobe installs into environments it creates (see plaidml_compat)."""
