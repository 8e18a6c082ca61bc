"""Reports for bug tickets: one versioned, redacted envelope (envelope.py), the redaction engine
(redact.py, with its patterns in patterns.py and the stateless detectors in detect.py),
the Markdown renderer for GitHub issues (markdown.py) and the machine diff (diff.py)."""
