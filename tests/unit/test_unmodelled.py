"""What kpemu does not model is one list: the README section is generated from it and `kpemu import`
refuses the fields it names."""

from __future__ import annotations

from pathlib import Path

from kpemu.model.unmodelled import UNMODELLED, refused_fields
from scripts.unmodelled_readme import README, section, updated
from tests.helpers import cli as kpemu
from tests.helpers import without_places


def test_the_readme_section_is_up_to_date() -> None:
    text = README.read_text()
    assert section() in text, "README.md is stale: run python -m scripts.unmodelled_readme"
    assert updated(text) == text


def test_every_entry_is_in_the_readme_once() -> None:
    rows = [line for line in section().splitlines() if line.startswith("| ") and not line.startswith("| what ")]
    assert len(rows) == len({u.what for u in UNMODELLED})
    assert "| IPVS timeouts | ipvsadm --set tcp tcpfin udp | refused (`KubeProxyConfiguration ipvs.tcpTimeout`, " \
           "`KubeProxyConfiguration ipvs.tcpFinTimeout`, `KubeProxyConfiguration ipvs.udpTimeout`) |" in rows


NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
spec: {podCIDR: 10.244.0.0/24}
status: {addresses: [{type: InternalIP, address: 192.168.58.2}], nodeInfo: {kubeProxyVersion: v1.33.1}}
"""


def test_import_refuses_each_listed_field_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(NODE + "---\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                 "mode: ipvs\nfeatureGates: {PreferSameTrafficDistribution: true, "
                 "KubeProxyNFTablesLocalhostNodePorts: false}\nipvs: {strictARP: true, tcpTimeout: 0s}\n---\n"
                 "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
                 "spec: {selector: {app: web}, publishNotReadyAddresses: true, ports: [{port: 80}]}\n")
    res = kpemu("import", str(f))
    assert res.returncode == 2 and not res.stdout and "Traceback" not in res.stderr
    assert without_places(res.stderr, f).splitlines() == [
        f"{f}: line 10: document 2 (KubeProxyConfiguration) featureGates: kpemu does not model feature gates "
        "but those kubeProxy.featureGates lists (a gate changes what kube-proxy programs (e.g. "
        "PreferSameTrafficDistribution in 1.33); kpemu models each release's defaults): remove featureGates to "
        "import the rest",
        f"{f}: line 11: document 2 (KubeProxyConfiguration) ipvs.strictARP: kpemu does not model IPVS strictARP "
        "(arp_ignore=1 and arp_announce=2 on the node): remove ipvs.strictARP to import the rest",
        f"{f}: line 16: document 3 (Service default/web) spec.publishNotReadyAddresses: kpemu does not model "
        "publishNotReadyAddresses without EndpointSlices (the EndpointSlice controller marks every selected pod "
        "ready; give the EndpointSlices (kubectl get endpointslices -A -o yaml)): remove spec.publishNotReadyAddresses "
        "to import the rest",
    ]


def test_refused_fields_have_a_kind_kpemu_reads() -> None:
    from kpemu.k8s.objects import KINDS

    assert all(u.kind in KINDS for u in refused_fields())
