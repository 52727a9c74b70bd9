"""What a flow's client saw (pure): one dict per connection."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FlowResult:
    """What the client saw: one dict per connection (outcome, backend, reply, sport, duration)."""

    name: str
    connections: list[dict] = field(default_factory=list)
    stderr: str = ""

    @property
    def backends(self) -> list[str]:
        return sorted({c["backend"] for c in self.connections if c.get("backend")})

    @property
    def outcomes(self) -> list[str]:
        return [c["outcome"] for c in self.connections]
