"""Helpers for the processes a run starts: wait for a readiness line, stop them (bounded)."""

from __future__ import annotations

import contextlib
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


def stop_processes(procs: list[subprocess.Popen], grace: float = 1.0) -> None:
    """Terminate processes we started, killing those that do not exit within `grace`."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
