"""Everything that touches this machine: each producer returns a capture that a probe parses."""
