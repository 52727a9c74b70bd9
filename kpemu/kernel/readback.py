"""Compare what the kernel reports with what the pure code expected."""

from __future__ import annotations

from kpemu.errors import ApplyError


def first_difference(expected: str, actual: str) -> str | None:
    """A one-line description of the first differing line, or None if the texts are equal."""
    exp, act = expected.splitlines(), actual.splitlines()
    for i in range(max(len(exp), len(act))):
        e = exp[i] if i < len(exp) else "<end>"
        a = act[i] if i < len(act) else "<end>"
        if e != a:
            return f"line {i + 1}: expected {e!r}, kernel has {a!r}"
    return None


def check_readback(what: str, expected: str, actual: str) -> None:
    """Raise ApplyError naming `what` and the first differing line when the texts differ."""
    diff = first_difference(expected, actual)
    if diff is not None:
        raise ApplyError(f"{what} read back differs from the plan: {diff}")
