"""Vendor hardware knowledge as lookups over the knowledge tables, loaded once; probes ask these
instead of one another."""
