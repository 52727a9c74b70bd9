"""Payload markers: every connection carries `kpemu:<flow>:<i>`; replies add `:reply:<pod>`.

NAT rewrites addresses and ports but never the payload, so the ledger follows a connection
across hops by its marker (pure; shared by the client, the container client and the server).
"""

from __future__ import annotations

REPLY = ":reply:"


def request_marker(flow: str, index: int) -> str:
    """The marker the client sends on connection `index` of `flow`."""
    return f"kpemu:{flow}:{index:03d}"


def reply_text(marker: str, pod: str) -> str:
    """What a server answers: the request marker plus the pod's name."""
    return f"{marker}{REPLY}{pod}"


def parse_reply(text: str) -> tuple[str, str] | None:
    """(marker, pod) from a reply line, or None when it is not a kpemu reply."""
    marker, sep, pod = text.strip().partition(REPLY)
    return (marker, pod) if sep and marker.startswith("kpemu:") else None
