"""Kubernetes objects as input: `kpemu import` of kubectl output (a List, documents, a directory),
the API server's defaulting and validation of Services, and Kubernetes objects wherever a topology
is accepted."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from kpemu.inputs.scenario import load_scenario
from kpemu.inputs.topology import load_topology
from tests.helpers import ROOT, cli, kpemu

CLUSTER = "tests/data/k8s/cluster.yaml"

CALICO_118 = """\
name: calico118
cni: calico-ipip
kubeProxy:
  version: '1.18'
  mode: ipvs
  clusterCIDR: 192.168.0.0/16
  masqueradeBit: 14
  masqueradeAll: false
  nodePortAddresses: []
  scheduler: rr
underlay: 10.246.198.0/24
serviceCIDR: 10.96.0.0/12
clusterCIDR: 192.168.0.0/16
nodes:
- {name: node1, ip: 10.246.198.17, podCIDR: 192.168.97.0/24, tunnelIP: 192.168.97.1}
- {name: node2, ip: 10.246.198.18, podCIDR: 192.168.98.0/24, tunnelIP: 192.168.98.1}
pods:
- name: echo-a
  node: node1
  ip: 192.168.97.10
  labels: {app: echo}
  ports:
  - {port: 8080, name: http}
- name: echo-b
  node: node2
  ip: 192.168.98.10
  labels: {app: echo}
  ports:
  - {port: 8081, name: http}
services:
- name: echo
  type: NodePort
  clusterIP: 10.103.89.171
  endpoints:
  - {ip: 192.168.97.10, node: node1}
  - {ip: 192.168.98.10, port: 8081, node: node2}
  ports:
  - {name: http, port: 80, targetPort: 8080, nodePort: 31657}
- name: db
  clusterIP: 10.110.3.216
  endpoints:
  - {ip: 192.168.97.20, node: node1}
  - {ip: 192.168.98.20, node: node2, ready: false}
  ports:
  - {port: 5432, targetPort: 5432}
"""

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
  annotations: {flannel.alpha.coreos.com/backend-type: vxlan}
spec: {podCIDR: 10.244.0.0/24}
status:
  addresses: [{type: InternalIP, address: 192.168.58.2}]
  nodeInfo: {kubeProxyVersion: v1.30.2}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {app: web}}
spec:
  nodeName: n1
  containers: [{name: web, ports: [{containerPort: 8080, name: http}]}]
status: {podIP: 10.244.0.5, conditions: [{type: Ready, status: "True"}]}
"""


def _manifest(tmp_path: Path, *services: str) -> Path:
    f = tmp_path / "objects.yaml"
    f.write_text(NODE + "".join(f"---\napiVersion: v1\nkind: Service\n{s}" for s in services))
    return f


def _imported(tmp_path: Path, *services: str) -> tuple[dict, str]:
    res = cli("import", str(_manifest(tmp_path, *services)))
    assert res.returncode == 0, res.stderr
    return yaml.safe_load(res.stdout), res.stdout


def _error(tmp_path: Path, *services: str) -> str:
    res = cli("import", str(_manifest(tmp_path, *services)))
    assert res.returncode == 2 and not res.stdout and "Traceback" not in res.stderr
    return res.stderr


def test_kubectl_list_imports_to_the_committed_topology() -> None:
    res = cli("import", CLUSTER, "--name", "k8s-cluster")
    assert res.returncode == 0, res.stderr
    first, _, rest = res.stdout.partition("\n")
    assert first == "# yaml-language-server: $schema=schemas/topology.schema.json"  # relative to where it goes
    assert rest == (ROOT / "topologies" / "k8s-cluster.yaml").read_text().partition("\n")[2]
    assert res.stderr == ("imported 3 nodes, 6 pods, 4 services; 1 note and 75 fields not modelled are listed at "
                          "the top of the topology\n")
    body = res.stdout[res.stdout.index("\nservices:\n") + 1:]
    assert body == """\
services:
- name: kubernetes
  clusterIP: 10.96.0.1
  endpoints:
  - {ip: 192.168.58.2}
  ports:
  - {name: https, port: 443, targetPort: 6443}
- name: web
  type: NodePort
  clusterIP: 10.96.112.40
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: 8080, nodePort: 30080}
- name: api
  namespace: shop
  clusterIP: 10.101.20.7
  selector: {app: api}
  ports:
  - {port: 9000, targetPort: 9000}
  sessionAffinity: ClientIP
  sessionAffinityTimeout: 3600
- name: kube-dns
  namespace: kube-system
  clusterIP: 10.96.0.10
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, targetPort: 53}
  - {name: metrics, port: 9153, targetPort: 9153}
"""


def test_unmodelled_fields_are_listed_not_dropped() -> None:
    text = cli("import", CLUSTER).stdout
    header = text[: text.index("\nname: ")]
    for line in ("#   cni flannel-vxlan inferred from the node annotations",
                 "#     metadata.managedFields (6)", "#     spec.containers[].image (6)",
                 '#     metadata.annotations["flannel.alpha.coreos.com/backend-data"] (3)',
                 "#     endpoints[].targetRef (3)", "#     status.nodeInfo.kernelVersion (3)"):
        assert line in header.splitlines()


def test_the_list_is_a_topology_everywhere() -> None:
    """validate, rules, check-node, trace and scenarios read Kubernetes objects through one loader."""
    direct = load_topology(ROOT / CLUSTER)
    imported = load_topology(ROOT / "topologies" / "k8s-cluster.yaml")
    assert direct.model_copy(update={"name": "k8s-cluster"}) == imported
    assert cli("validate", CLUSTER).stdout == f"{CLUSTER}: ok (topology)\n1 of 1 file(s) valid\n"
    assert "KUBE-SVC-" in cli("rules", CLUSTER, "--node", "k8s-w1", "--format", "iptables-save").stdout


def test_scenario_topology_may_be_kubernetes_objects(tmp_path: Path) -> None:
    sc = tmp_path / "sc.yaml"
    sc.write_text(f"name: k8s-direct\ntopology: {ROOT / CLUSTER}\nflows:\n"
                  "  - {name: f, from: web-7d9c8f6b5-q2xkz, to: {service: shop/api, via: clusterIP}}\n")
    loaded = load_scenario(sc)
    assert loaded.topology.name == "k8s-direct" and loaded.flows[0].dst_ip == "10.101.20.7"


def test_directory_of_an_older_calico_ipvs_cluster() -> None:
    """1.18: Endpoints-era objects, discovery.k8s.io/v1beta1 slices (topology, not nodeName), a
    KubeProxyConfiguration, pasted manifests (clusterIP and nodePort allocated), a named targetPort
    served on different numbers, a node without spec.podCIDR, a hostNetwork pod, a headless Service."""
    res = cli("import", "tests/data/k8s/calico-1.18", "--name", "calico118")
    assert res.returncode == 0, res.stderr
    assert res.stdout[res.stdout.index("name: calico118"):] == CALICO_118
    assert """\
# Notes:
#   cni calico-ipip inferred from the node annotations
#   Pod kube-system/calico-node-x2p9f left out: hostNetwork: it is its node
#   Service default/echo-headless: headless (clusterIP: None): kube-proxy programs nothing; left out
#   Service default/db: clusterIP 10.110.3.216 allocated from 10.96.0.0/12
#   Service default/echo: clusterIP 10.103.89.171 allocated from 10.96.0.0/12
#   Service default/echo: port http nodePort 31657 allocated from 30000-32767
#   Service default/echo: explicit endpoints (the selector's pods serve the named targetPort on different numbers)
#   Node node2: podCIDR 192.168.98.0/24 inferred (calico-ipip: no spec.podCIDR)
""" in res.stdout


def test_allocation_is_deterministic_and_avoids_used_addresses(tmp_path: Path) -> None:
    svc = "metadata: {name: a}\nspec: {type: NodePort, selector: {app: web}, ports: [{port: 80, targetPort: http}]}\n"
    first, _ = _imported(tmp_path, svc)
    again, _ = _imported(tmp_path, svc)
    assert first == again
    a = first["services"][0]
    taken = f"metadata: {{name: b}}\nspec: {{clusterIP: {a['clusterIP']}, type: NodePort, selector: {{app: web}}, " \
            f"ports: [{{port: 80, targetPort: 8080, nodePort: {a['ports'][0]['nodePort']}}}]}}\n"
    both, _ = _imported(tmp_path, svc, taken)
    b, a2 = both["services"][1], both["services"][0]
    assert a2["clusterIP"] != b["clusterIP"] and a2["ports"][0]["nodePort"] != b["ports"][0]["nodePort"]
    assert a["ports"][0]["targetPort"] == 8080  # the pod's container port named http


def test_what_the_api_server_accepts(tmp_path: Path) -> None:
    data, text = _imported(
        tmp_path,
        "metadata: {name: dual}\nspec:\n  type: LoadBalancer\n  externalTrafficPolicy: Local\n"
        "  ipFamilies: [IPv4, IPv6]\n  ipFamilyPolicy: PreferDualStack\n"
        "  clusterIP: 10.96.50.5\n  clusterIPs: [10.96.50.5, 'fd00:10:96::5']\n"
        "  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}\n"
        "  selector: {app: none}\n  ports: [{port: 443, nodePort: 31443}]\n"
        "status: {loadBalancer: {ingress: [{ip: 203.0.113.7}]}}\n",
        "metadata: {name: headless}\nspec: {clusterIP: None, selector: {app: web}}\n",
    )
    svc = data["services"][0]
    assert svc["clusterIP"] == "10.96.50.5" and svc["sessionAffinityTimeout"] == 600
    assert svc["endpoints"] == [] and "selector" not in svc  # a selector that matches no pod yet
    assert svc["loadBalancerIPs"] == ["203.0.113.7"] and 30000 <= svc["healthCheckNodePort"] <= 32767
    assert [s["name"] for s in data["services"]] == ["dual"]
    assert "#   Service default/dual: IPv6 family not modelled: only the IPv4 clusterIP is used" in text.splitlines()
    assert "#   Service default/dual: explicit endpoints (the selector matches no pod)" in text.splitlines()


def test_endpoint_slice_conditions(tmp_path: Path) -> None:
    svc = "metadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n"
    f = _manifest(tmp_path, svc)
    f.write_text(f.read_text() + """---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: "", port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.244.0.5], nodeName: n1, conditions: {ready: false, serving: true, terminating: true}}
- {addresses: [10.244.0.9], nodeName: n1, conditions: {ready: true}}
""")
    res = cli("import", str(f))
    assert res.returncode == 0, res.stderr
    svc = yaml.safe_load(res.stdout)["services"][0]
    assert svc["endpoints"] == [
        {"ip": "10.244.0.5", "node": "n1", "ready": False, "terminating": True},
        {"ip": "10.244.0.9", "node": "n1"},
    ]


def test_what_the_api_server_rejects(tmp_path: Path) -> None:
    f = str(tmp_path / "objects.yaml")
    where = "document 3 (Service default/x)"
    cases = {
        "spec: {selector: {app: web}}": "spec.ports: Required value",
        "spec: {ports: [{name: a, port: 80}, {port: 81}]}": "spec.ports[1].name: Required value",
        "spec: {ports: [{port: 0}]}": "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        "spec: {ports: [{port: 80, protocol: ICMP}]}":
            "spec.ports[0].protocol: Unsupported value: 'ICMP': supported values: 'SCTP', 'TCP', 'UDP'",
        "spec: {ports: [{port: 80, nodePort: 30001}]}":
            "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
        "spec: {type: NodePort, ports: [{port: 80, nodePort: 80}]}":
            "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid "
            "ports is 30000-32767",
        "spec: {type: NodePort, healthCheckNodePort: 31000, ports: [{port: 80}]}":
            "spec.healthCheckNodePort: Invalid value: 31000: may only be set when `type` is 'LoadBalancer' and "
            "`externalTrafficPolicy` is 'Local'",
        "spec: {clusterIP: 10.96.0.7, clusterIPs: [10.96.0.8], ports: [{port: 80}]}":
            "spec.clusterIPs[0]: Invalid value: '10.96.0.8': must match `clusterIP` when present",
        "spec: {sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 0}}, ports: [{port: 8}]}":
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less "
            "than 86400",
        "spec: {sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}, ports: [{port: 80}]}":
            "spec.sessionAffinityConfig: Invalid value: must not be set when `sessionAffinity` is None",
        "spec: {ports: [{port: 80, targetPort: Not_A_Name}]}":
            "spec.ports[0].targetPort: Invalid value: 'Not_A_Name': must be a port name (at most 15 lower-case "
            "letters, digits and '-') or a number",
        "spec: {type: Bogus, ports: [{port: 80}]}":
            "spec.type: Unsupported value: 'Bogus': supported values: 'ClusterIP', 'ExternalName', 'LoadBalancer', "
            "'NodePort'",
    }
    for spec, message in cases.items():
        assert _error(tmp_path, f"metadata: {{name: x}}\n{spec}\n") == f"{f}: line 22: {where} {message}\n", spec


def test_unknown_kind_and_not_an_object(tmp_path: Path) -> None:
    f = tmp_path / "objects.yaml"
    f.write_text(NODE + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\nnodes: []\n")
    res = cli("import", str(f))
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"{f}: line 20: document 3 kind: unknown kind 'Deployment'; kpemu reads Node, Pod, Service, EndpointSlice, "
        "Endpoints, KubeProxyConfiguration, ConfigMap (and Lists of them): remove it or select kinds, e.g. kubectl get "
        "nodes,pods,services,endpointslices",
        f"{f}: line 23: document 4: not a Kubernetes object (expected apiVersion and kind); give kubectl output, "
        "e.g. kubectl get nodes,pods,services,endpointslices -A -o yaml",
    ]
    assert cli("import", str(tmp_path / "missing.yaml")).stderr == f"{tmp_path / 'missing.yaml'}: no such file or " \
                                                                        "directory\n"


def test_cni_given_or_inferred(tmp_path: Path) -> None:
    f = _manifest(tmp_path)
    assert yaml.safe_load(cli("import", str(f)).stdout)["cni"] == "flannel-vxlan"
    f.write_text(NODE.replace("flannel.alpha.coreos.com/backend-type: vxlan", "other: x"))
    res = cli("import", str(f), "--cni", "calico-ipip", "--name", "given")
    data = yaml.safe_load(res.stdout)
    assert (data["cni"], data["name"], data["kubeProxy"]["version"]) == ("calico-ipip", "given", "1.30")


def test_standard_input(tmp_path: Path) -> None:
    f = _manifest(tmp_path, "metadata: {name: manual}\nspec: {ports: [{port: 80}]}\n")
    res = kpemu("import", "-", "--name", "piped", input=f.read_text())
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("# yaml-language-server: $schema=schemas/topology.schema.json\n"
                                 "# kpemu topology imported from - (kpemu import).\n")
    assert "#   Service default/manual: no selector and no EndpointSlices or Endpoints: no endpoints" in res.stdout
    assert yaml.safe_load(res.stdout)["services"][0]["endpoints"] == []
    f.write_text(NODE.replace("flannel.alpha.coreos.com/backend-type: vxlan",
                              "projectcalico.org/IPv4VXLANTunnelAddr: 10.244.0.1"))
    res = cli("import", str(f))
    assert res.returncode == 2
    assert res.stderr == (f"{f}: the node annotations say CNI calico-vxlan; kpemu models flannel-vxlan and "
                          "calico-ipip: give --cni\n")


def test_kube_proxy_configuration(tmp_path: Path) -> None:
    f = _manifest(tmp_path)
    f.write_text(f.read_text() + "---\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                 "mode: iptables\nclusterCIDR: 10.244.0.0/16,fd00:10:244::/56\nnodePortAddresses: [primary]\n"
                 "iptables: {masqueradeBit: 15, localhostNodePorts: false}\nconntrack: {maxPerCore: 32768}\n")
    res = cli("import", str(f))
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load(res.stdout)["kubeProxy"] == {
        "version": "1.30", "mode": "iptables", "clusterCIDR": "10.244.0.0/16", "masqueradeBit": 15,
        "localhostNodePorts": False, "nodePortAddresses": ["192.168.58.2/32"]}
    assert "#   KubeProxyConfiguration:\n#     conntrack.maxPerCore (1)\n" in res.stdout
    f.write_text(f.read_text().replace("mode: iptables", "mode: nftables").replace(
        "iptables: {masqueradeBit: 15, localhostNodePorts: false}", "nftables: {masqueradeBit: 13}"))
    assert yaml.safe_load(cli("import", str(f)).stdout)["kubeProxy"] == {
        "version": "1.30", "mode": "nftables", "clusterCIDR": "10.244.0.0/16", "masqueradeBit": 13,
        "nodePortAddresses": ["192.168.58.2/32"]}
    f.write_text(f.read_text().replace("mode: nftables", "mode: kernelspace"))
    assert cli("import", str(f)).stderr == (f"{f}: line 21: document 3 (KubeProxyConfiguration) mode: Unsupported "
                                              "value: 'kernelspace': kpemu models kube-proxy modes 'iptables', 'ipvs' "
                                              "and 'nftables'\n")


PASTED = """\
name: pasted
underlay: 192.168.1.0/24
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node1, ip: 192.168.1.100, podCIDR: 10.244.0.0/24}
pods:
  - {name: web-0, node: node1, ip: 10.244.0.2, labels: {app: web}, ports: [{port: 8080, name: http}]}
services:
  - {name: plain, clusterIP: 10.96.0.20, selector: {app: web}, ports: [{port: 81, targetPort: 8080}]}
  - apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec:
      type: NodePort
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: http}]
      ipFamilyPolicy: SingleStack
      ipFamilies: [IPv4]
  - apiVersion: v1
    kind: Service
    metadata: {name: web-headless}
    spec: {clusterIP: None, selector: {app: web}}
"""


def test_a_topology_may_include_pasted_service_manifests(tmp_path: Path) -> None:
    """The metadata/spec wrapper inside `services:`: defaulted against the topology's own pods and
    addresses (clusterIP from its serviceCIDR, the named targetPort from the pod); headless dropped."""
    f = tmp_path / "pasted.yaml"
    f.write_text(PASTED)
    topo = load_topology(f)
    assert [s.model_dump(exclude_defaults=True) for s in topo.services] == [
        {"name": "plain", "clusterIP": "10.96.0.20", "selector": {"app": "web"},
         "ports": [{"port": 81, "targetPort": 8080}]},
        {"name": "web", "type": "NodePort", "clusterIP": "10.100.218.95", "selector": {"app": "web"},
         "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 32584}]},
    ]
    f.write_text(PASTED.replace("ports: [{name: http, port: 80, targetPort: http}]", "ports: []"))
    res = cli("validate", str(f))
    assert (res.returncode, res.stderr) == (2, f"{f}: line 16: services[1] (Service default/web) spec.ports: "
                                               "Required value\n")


def test_import_o_is_the_format_and_the_file_flag_is_out(tmp_path: Path) -> None:
    old = cli("import", CLUSTER, "-o", "cluster.yaml")
    assert old.returncode == 2
    assert old.stderr.strip() == ("kpemu import: -o is the output format now, as in kubectl: yaml (default) or "
                                  "json; write the topology to a file with --out cluster.yaml (or -f cluster.yaml)")
    data = json.loads(cli("import", CLUSTER, "-o", "json").stdout)
    out = tmp_path / "c.yaml"
    assert cli("import", CLUSTER, "-f", str(out)).returncode == 0
    assert yaml.safe_load(out.read_text()) == data
