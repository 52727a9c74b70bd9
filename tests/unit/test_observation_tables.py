"""Every registered proxy mode is observed: its trace kind and its walk kind have an entry in each
table that traces, explains, walks and reads dumps (a new mode that forgets one fails here, naming
the table)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from kpemu.analyse.explain import EXPLAINERS
from kpemu.analyse.oracle import WALKERS
from kpemu.dumps.files import DumpFiles
from kpemu.dumps.registry import DUMPS, WITHOUT_TOPOLOGY
from kpemu.kernel.tracers import TRACERS
from kpemu.proxy.modes import MODES

# table name -> (the table, the ProxyMode field that keys it)
TABLES = {
    "kpemu.kernel.tracers.TRACERS": (TRACERS, "trace"),
    "kpemu.analyse.explain.EXPLAINERS": (EXPLAINERS, "trace"),
    "kpemu.analyse.oracle.WALKERS": (WALKERS, "walks"),
    "kpemu.dumps.registry.DUMPS": (DUMPS, "walks"),
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_mode_has_an_entry_in_the_table(table: str) -> None:
    entries, key = TABLES[table]
    missing = [f"mode {name}: {key}={getattr(m, key)!r}" for name, m in MODES.items() if getattr(m, key) not in entries]
    assert missing == [], f"{table} has no entry for {', '.join(missing)}"


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_entry_serves_a_mode(table: str) -> None:
    entries, key = TABLES[table]
    assert sorted(entries) == sorted({getattr(m, key) for m in MODES.values()}), table


def test_each_dump_file_belongs_to_one_kind_of_dumps() -> None:
    owners = [f for d in DUMPS.values() for f in d.files]
    assert sorted(owners) == sorted(f.name for f in fields(DumpFiles))
    assert WITHOUT_TOPOLOGY in DUMPS
