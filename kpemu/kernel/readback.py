"""Compare what the kernel reports with what the pure code expected."""

from __future__ import annotations


def first_difference(expected: str, actual: str) -> str | None:
    """A one-line description of the first differing line, or None if the texts are equal."""
    exp, act = expected.splitlines(), actual.splitlines()
    for i in range(max(len(exp), len(act))):
        e = exp[i] if i < len(exp) else "<end>"
        a = act[i] if i < len(act) else "<end>"
        if e != a:
            return f"line {i + 1}: expected {e!r}, kernel has {a!r}"
    return None

