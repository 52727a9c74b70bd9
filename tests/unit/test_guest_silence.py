"""A guest counts as hung when its agent's heartbeat file stops changing for KPEMU_HEARTBEAT_LIMIT
seconds of this host's clock; before the agent first beats, it does not (booting has its own limit)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kpemu.guest import Silence
from kpemu.jobs import exchange


def test_a_heartbeat_that_stops_moving_counts_as_hung(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPEMU_HEARTBEAT_LIMIT", "0.3")
    monkeypatch.delenv("KPEMU_SLOWDOWN", raising=False)
    silence = Silence(tmp_path)
    beat = tmp_path / exchange.HEARTBEAT
    time.sleep(0.4)
    assert silence() is None  # no agent yet: not hung
    beat.touch()
    assert silence() is None
    time.sleep(0.4)
    assert silence() == "its agent gave no sign of life for 0s"
    os.utime(beat, ns=(beat.stat().st_mtime_ns + 1_000_000_000,) * 2)  # it beat again
    assert silence() is None


def test_a_guest_clock_far_behind_this_host_is_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPEMU_HEARTBEAT_LIMIT", "0.3")
    beat = tmp_path / exchange.HEARTBEAT
    silence = Silence(tmp_path)
    for second in range(3):  # beats stamped an hour in the past, as a guest with a wrong clock writes them
        stamp = int((time.time() - 3600 + second) * 1e9)
        beat.touch()
        os.utime(beat, ns=(stamp, stamp))
        assert silence() is None
        time.sleep(0.2)
