"""What a lab costs in open descriptors (standard library only: read by the model's limits and by the
executor, on the host and in the guest, when it raises RLIMIT_NOFILE before a lab is built)."""

from __future__ import annotations

BASE_FDS = 256  # descriptors kpemu holds besides a lab's own (Python, pipes, state files, tracers)
CAPTURE_FDS = 4  # a tcpdump capture: its pipes and its pcap file


def descriptors_needed(sockets: int, captures: int) -> int:
    """Descriptors a run holds at once: one per pod server socket, `CAPTURE_FDS` per capture point and
    `BASE_FDS`. Everything else is bounded: a namespace is entered with two descriptors, closed on leaving."""
    return BASE_FDS + sockets + CAPTURE_FDS * captures
