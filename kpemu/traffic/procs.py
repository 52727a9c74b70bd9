"""Helpers for the processes a run starts: wait (bounded) for a readiness line from each."""

from __future__ import annotations

import selectors
import subprocess
import time


def wait_for_lines(procs: dict[str, subprocess.Popen], word: str, timeout: float, stream: str) -> list[str]:
    """Wait until every process printed a line containing `word`; return the names that did not."""
    sel = selectors.DefaultSelector()
    for name, p in procs.items():
        sel.register(getattr(p, stream), selectors.EVENT_READ, name)
    pending = set(procs)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic())):
            line = key.fileobj.readline()  # type: ignore[union-attr]
            if word in line:
                pending.discard(key.data)
                sel.unregister(key.fileobj)
            elif not line:  # EOF: the process died
                sel.unregister(key.fileobj)
                deadline = min(deadline, time.monotonic())
    sel.close()
    return sorted(pending)
