"""Reports for bug tickets: one versioned, redacted envelope (envelope.py), the redaction engine
(redact.py), the Markdown renderer for GitHub issues (markdown.py) and the machine diff (diff.py)."""
