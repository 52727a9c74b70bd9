"""Every registered proxy mode is observed: its trace kind and its walk kind have an entry in each
table that traces, explains, walks and reads dumps (a new mode that forgets one fails here, naming
the table), and each kind of state it reads back is saved, compared, typed and expectable."""

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
    assert sorted(owners) == sorted(f.name for f in fields(DumpFiles) if f.name not in DumpFiles.options)
    assert WITHOUT_TOPOLOGY in DUMPS


def test_every_kind_a_mode_reads_back_is_saved_compared_typed_and_expectable() -> None:
    from typing import get_args, get_type_hints

    from kpemu.jobs.schema import Readback
    from kpemu.jobs.verify import COMPARE
    from kpemu.kernel.snapshot import RULE_KINDS
    from kpemu.model.scenario import RulesExpect

    saved = {k for m in MODES.values() for k in m.saved}
    assert saved == set(RULE_KINDS) == set(COMPARE) == set(get_args(get_type_hints(Readback)["kind"]))
    assert set(get_args(get_type_hints(RulesExpect)["kind"])) == {RULE_KINDS[k] for k in saved}
