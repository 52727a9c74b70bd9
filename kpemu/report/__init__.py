"""Renderers (pure): hop tables, report.md, hops.json, the terminal summary, `kpemu inspect`."""
