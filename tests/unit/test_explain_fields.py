"""Every field of a topology and a scenario file says what it means (kpemu.model.fielddocs, in the JSON
schemas editors read), and `kpemu explain FIELD` prints it with its type, default and fields."""

from __future__ import annotations

from kpemu.faults import names
from kpemu.model.fielddocs import DOCS
from kpemu.model.schema import KINDS, schema
from tests.helpers import cli


def _properties() -> set[str]:
    out = set()
    for kind, model in KINDS.items():
        root = schema(kind, names())
        for name, node in [(model.__name__, root), *root.get("$defs", {}).items()]:
            out |= {f"{name}.{key}" for key in node.get("properties", {})}
    return out


def test_every_field_is_described_and_every_description_has_its_field() -> None:
    fields = _properties()
    assert sorted(fields - DOCS.keys()) == [], "describe these in kpemu/model/fielddocs.py"
    assert sorted(DOCS.keys() - fields) == [], "these fields are gone: remove their words"
    for kind in KINDS:
        root = schema(kind, names())
        for node in [root, *root.get("$defs", {}).values()]:
            assert all(p.get("description") for p in node.get("properties", {}).values())


def test_explain_prints_meaning_type_default_and_fields() -> None:
    r = cli("explain", "topology.kubeProxy.masqueradeBit")
    assert (r.returncode, r.stdout) == (
        0, "topology kubeProxy.masqueradeBit: integer (>= 0, <= 31) (default 14)\n"
           "  The bit of the packet mark that KUBE-MARK-MASQ sets (0-31, default 14).\n")
    route = cli("explain", "routes[0]").stdout
    assert route == ("topology routes: list of Route\n"
                     "  Extra routes in the underlay router (e.g. a MetalLB-style address routed to a node).\n\n"
                     "  fields:\n"
                     "    dst  string\n"
                     "         The destination network of the underlay route.\n"
                     "    via  string\n"
                     "         Where it goes: a node's name or an address.\n")
    both = cli("explain", "name").stdout
    assert both.startswith("topology name: string\n") and "\nscenario name: string\n" in both


def test_explain_names_the_field_it_does_not_know_and_the_nearest() -> None:
    r = cli("explain", "flows.conections")
    assert r.returncode == 2
    assert r.stderr.strip() == ("kpemu explain: no field 'conections' in scenario flows; did you mean connections? "
                                "(its fields: command, connections, from, http, name, protocol, size, sourcePort, "
                                "timeout, to)")
