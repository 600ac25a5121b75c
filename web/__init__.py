"""The HTML face: server-rendered pages over stored results and findings (no analysis on the read path)."""
