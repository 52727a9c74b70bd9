"""kube-proxy's own word on whether it has synced (pure): its metrics, as Prometheus text.

`kubeproxy_sync_proxy_rules_last_timestamp_seconds` is when it last wrote its rules, and
`kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds` when a change last asked for a write
(pkg/proxy/metrics/metrics.go), per IP family: a family is synced when it has written and nothing
was asked for since. /healthz is no readiness signal (it answers 200 while kube-proxy starts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LAST = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
QUEUED = "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"
# `name{ip_family="IPv4"} value`; 1.29 has plain gauges (no label), which its two proxiers share
_SAMPLE = re.compile(r'^(\w+)(?:\{(?:[^}]*ip_family="(\w+)")?[^}]*\})?\s+(\S+)$')


@dataclass(frozen=True)
class Sync:
    """One IP family's last write and last request for one, in seconds since the epoch (0: never)."""

    family: str
    last: float
    queued: float

    @property
    def done(self) -> bool:
        return self.last > 0 and self.queued <= self.last


def syncs(text: str) -> dict[str, Sync]:
    """Each IP family's Sync from a /metrics text (families with neither metric are left out)."""
    seen: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if m and m[1] in (LAST, QUEUED):
            try:
                seen.setdefault(m[2] or UNLABELLED, {})[m[1]] = float(m[3])
            except ValueError:
                continue
    return {f: Sync(f, v.get(LAST, 0.0), v.get(QUEUED, 0.0)) for f, v in sorted(seen.items())}


UNLABELLED = ""  # the family of gauges without an ip_family label (a release that had none)


def synced(text: str, family: str = "IPv4") -> Sync | None:
    """The family's Sync when it is done (a release without the label: its only one), else None."""
    found = syncs(text)
    s = found.get(family, found.get(UNLABELLED))
    return s if s is not None and s.done else None
