"""What every field of a topology and a scenario file means, by model and YAML key (pure data).

One home for the words: the JSON schemas carry them as `description` (editors show them on hover),
and `kpemu explain FIELD` prints them. A unit test checks that every field of both schemas has one.
"""

from __future__ import annotations

DOCS: dict[str, str] = {
    # topology
    "Topology.name": "The lab's name: its namespaces are kp-NAME-MEMBER (lower-case letters, digits, '-').",
    "Topology.cni": "How pods are wired across nodes: flannel-vxlan (VXLAN on UDP 8472, cni0 bridge) or "
                    "calico-ipip (IPIP tunl0, /32 routes to cali* veths).",
    "Topology.kubeProxy": "kube-proxy's settings: mode, release and the options that change what it programs.",
    "Topology.underlay": "The node network (CIDR) the underlay router serves; node and external addresses "
                         "lie in it.",
    "Topology.underlayGateway": "The underlay router's address on the node network (default: the network's "
                                "first address).",
    "Topology.serviceCIDR": "The Service network (kube-apiserver's --service-cluster-ip-range); ClusterIPs must "
                            "lie in it (default: not checked).",
    "Topology.clusterCIDR": "The pod network (flannel's Network, kube-proxy's clusterCIDR unless kubeProxy "
                            "sets its own); default: the smallest network holding every podCIDR.",
    "Topology.mtu": "The MTU of node interfaces on the underlay (the tunnel and pod MTUs follow from it, as "
                    "the CNI sets them).",
    "Topology.nodes": "The Kubernetes nodes: one namespace each on the underlay, running kube-proxy's state.",
    "Topology.pods": "The pods: one namespace each on its node, serving its ports.",
    "Topology.services": "The Services kube-proxy programs on every node.",
    "Topology.externals": "Hosts outside the cluster on the underlay: clients, and load balancers that "
                          "forward a VIP to the nodes' NodePorts.",
    "Topology.routes": "Extra routes in the underlay router (e.g. a MetalLB-style address routed to a node).",
    "KubeProxy.mode": "kube-proxy's proxy mode: iptables, ipvs or nftables.",
    "KubeProxy.version": "kube-proxy's release, such as \"1.33\"; the rules follow that release (default: the "
                         "newest kpemu models for the mode).",
    "KubeProxy.clusterCIDR": "kube-proxy's --cluster-cidr: traffic from outside it to a Service is "
                             "masqueraded (detectLocalMode ClusterCIDR). Default: the topology's clusterCIDR.",
    "KubeProxy.masqueradeAll": "kube-proxy's --masquerade-all: SNAT every packet to a Service IP.",
    "KubeProxy.masqueradeBit": "The bit of the packet mark that KUBE-MARK-MASQ sets (0-31, default 14).",
    "KubeProxy.nodePortAddresses": "kube-proxy's --nodeport-addresses: the node addresses (as CIDRs) NodePorts "
                                   "answer on; empty: every local address.",
    "KubeProxy.localhostNodePorts": "iptables mode: whether NodePorts answer on 127.0.0.1 (route_localnet), "
                                    "as kube-proxy's --iptables-localhost-nodeports.",
    "KubeProxy.randomFully": "Whether MASQUERADE rules carry --random-fully; default: what the node's iptables "
                             "supports.",
    "KubeProxy.nfacct": "iptables mode 1.30+: nfacct counters on the INVALID drop and localhost NodePorts; "
                        "default: used when the node's kernel can create them.",
    "KubeProxy.scheduler": "IPVS mode: the virtual servers' scheduler (rr, wrr, lc, ...; default rr).",
    "KubeProxy.nodePortRange": "The NodePort range (kube-apiserver's --service-node-port-range), such as "
                               "30000-32767.",
    "KubeProxy.backend": "Which iptables binary programs the node: nft (iptables-nft) or legacy.",
    "KubeProxy.detectLocalMode": "How kube-proxy tells pod traffic from the rest: ClusterCIDR (default; -s "
                                 "clusterCIDR), NodeCIDR (the node's podCIDR, 1.18+), BridgeInterface (-i "
                                 "bridgeInterface, 1.23+) or InterfaceNamePrefix (-i PREFIX+, 1.23+).",
    "KubeProxy.bridgeInterface": "detectLocalMode BridgeInterface: the bridge pods' traffic comes in on (e.g. cni0).",
    "KubeProxy.interfaceNamePrefix": "detectLocalMode InterfaceNamePrefix: the prefix of pods' host-side "
                                     "interfaces (e.g. veth).",
    "KubeProxy.tcpBeLiberal": "conntrack.tcpBeLiberal (1.29+): kube-proxy sets nf_conntrack_tcp_be_liberal=1, "
                              "and iptables mode then writes no INVALID drop rule.",
    "KubeProxy.implementation": "Who programs the nodes: model (kpemu's model of kube-proxy, the default) or "
                                "upstream (the real kube-proxy, built from source, one per node namespace; "
                                "`kpemu run --kube-proxy upstream`).",
    "KubeProxy.upstream": "implementation upstream: the release to build and run (such as 1.37.2), or the path "
                          "of a kube-proxy binary; default: the newest patch of `version`.",
    "KubeProxy.featureGates": "kube-proxy feature gates that change what it programs (others are refused).",
    "FeatureGates.KubeProxyNFTablesLocalhostNodePorts": "nftables mode 1.37+ (alpha, off by default): reject and "
                                                        "count NodePort traffic to 127.0.0.0/8.",
    "Node.name": "The node's name, as in `kubectl get nodes`.",
    "Node.ip": "The node's address on the underlay (its InternalIP).",
    "Node.podCIDR": "The node's pod network (spec.podCIDR); its pods' addresses lie in it.",
    "Node.tunnelIP": "calico: the tunl0 address (default: the first address of podCIDR).",
    "Node.zone": "The node's topology.kubernetes.io/zone label: which endpoints topology-aware routing gives it.",
    "Pod.name": "The pod's name.",
    "Pod.namespace": "The pod's Kubernetes namespace (default \"default\").",
    "Pod.node": "The node the pod runs on.",
    "Pod.ip": "The pod's address, in its node's podCIDR.",
    "Pod.labels": "The pod's labels, which Service selectors match.",
    "Pod.ports": "The ports the pod serves (numbers, or {port, protocol, name}); a small server answers on "
                 "each.",
    "Pod.ready": "Whether the pod is ready: a not-ready pod is no Service endpoint (kube-proxy's view of the "
                 "EndpointSlice).",
    "Pod.terminating": "Whether the pod is terminating: kube-proxy uses such an endpoint only as a fallback "
                       "when no ready one is left (serving and terminating).",
    "Pod.image": "A container image for the pod (instead of kpemu's own server): the container gets the "
                 "pod's namespace and no docker network.",
    "Pod.command": "The container's command (replaces the image's CMD).",
    "Pod.env": "Environment variables of the container.",
    "PodPort.port": "The port number the pod serves.",
    "PodPort.protocol": "TCP or UDP.",
    "PodPort.name": "The port's name, which a Service's targetPort may name.",
    "Service.name": "The Service's name.",
    "Service.namespace": "The Service's namespace (default \"default\").",
    "Service.type": "ClusterIP, NodePort or LoadBalancer.",
    "Service.clusterIP": "The Service's ClusterIP (spec.clusterIP).",
    "Service.selector": "The pod labels that select its endpoints (instead of explicit endpoints).",
    "Service.endpoints": "Explicit endpoints (as EndpointSlices list them) instead of a selector.",
    "Service.ports": "The Service's ports.",
    "Service.externalIPs": "spec.externalIPs: addresses on which the Service also answers.",
    "Service.loadBalancerIPs": "The load balancer's addresses (status.loadBalancer.ingress[].ip).",
    "Service.labels": "metadata.labels. kube-proxy leaves out a Service labelled "
                      "service.kubernetes.io/service-proxy-name (another proxy serves it) or "
                      "service.kubernetes.io/headless: no rule for any of its addresses.",
    "Service.loadBalancerProxyIPs": "Ingress addresses with ipMode: Proxy: the load balancer proxies to the nodes, "
                                    "so kube-proxy 1.30+ programs nothing for them (1.29 and older: as VIPs).",
    "Service.allocateLoadBalancerNodePorts": "false: a LoadBalancer without NodePorts (nodePort only where given).",
    "Service.trafficDistribution": "spec.trafficDistribution: PreferClose (1.31+), PreferSameZone or "
                                   "PreferSameNode (1.34+): the EndpointSlice controller's hints for the "
                                   "selector's pods, which kube-proxy follows per node.",
    "Service.topologyMode": "The service.kubernetes.io/topology-mode annotation: before 1.31 kube-proxy uses "
                            "hints only when it (1.27+) or topologyAwareHints is set and not Disabled.",
    "Service.topologyAwareHints": "The service.kubernetes.io/topology-aware-hints annotation (1.24-1.26: hints "
                                  "only when Auto).",
    "Service.loadBalancerSourceRanges": "The client CIDRs allowed to reach the load balancer addresses (the "
                                        "firewall chains kube-proxy writes).",
    "Service.externalTrafficPolicy": "Cluster (any endpoint, source masqueraded) or Local (only this node's "
                                     "endpoints, source kept) for NodePort, LoadBalancer and external IPs.",
    "Service.internalTrafficPolicy": "Cluster or Local (only endpoints on the client's node) for ClusterIP "
                                     "traffic from inside the cluster.",
    "Service.sessionAffinity": "None or ClientIP (a client keeps its endpoint: the recent match, IPVS "
                               "persistence or the nft affinity set).",
    "Service.sessionAffinityTimeout": "Seconds a ClientIP affinity lasts (default 10800).",
    "Service.healthCheckNodePort": "externalTrafficPolicy Local LoadBalancer: the node port of kube-proxy's "
                                   "health check for the Service.",
    "ServicePort.name": "The port's name (part of kube-proxy's chain names and comments).",
    "ServicePort.port": "The Service port clients connect to.",
    "ServicePort.targetPort": "The pod port it forwards to (default: the same as port).",
    "ServicePort.nodePort": "The NodePort (NodePort and LoadBalancer Services), in the topology's range.",
    "ServicePort.protocol": "TCP, UDP or SCTP.",
    "Endpoint.ip": "The endpoint's address.",
    "Endpoint.port": "The endpoint's port (default: the Service port's targetPort).",
    "Endpoint.node": "The node the endpoint lives on (for Local traffic policies).",
    "Endpoint.ready": "conditions.ready: a ready endpoint receives traffic.",
    "Endpoint.serving": "conditions.serving: a terminating endpoint that still serves can be a fallback "
                        "(unset: serving, as kube-proxy reads an unset condition).",
    "Endpoint.terminating": "conditions.terminating: the endpoint is going away.",
    "Endpoint.hints": "The EndpointSlice hints: the zones (forZones) and, 1.34+, nodes (forNodes) that use it.",
    "EndpointHints.forZones": "The zones whose nodes use this endpoint (topology-aware routing).",
    "EndpointHints.forNodes": "The nodes that use this endpoint (PreferSameNode; kube-proxy 1.34+ reads them).",
    "External.name": "The external host's name.",
    "External.ip": "Its address on the underlay (or on its own subnet).",
    "External.subnet": "Its own network behind the underlay router (default: the /24 around ip).",
    "External.role": "client (sends flows) or loadbalancer (forwards its VIP to every node's NodePort).",
    "External.vip": "A load balancer's virtual address.",
    "External.backends": "A load balancer's Services (namespace/name) whose NodePorts it balances.",
    "External.image": "A container image for the external host (it runs each flow's client command).",
    "External.command": "The container's command (replaces the image's CMD).",
    "External.env": "Environment variables of the container.",
    "Route.dst": "The destination network of the underlay route.",
    "Route.via": "Where it goes: a node's name or an address.",
    # scenario
    "ScenarioSpec.name": "The scenario's name (its run folder, and the lab's name unless lab is given).",
    "ScenarioSpec.description": "Free text about the scenario, shown in the report.",
    "ScenarioSpec.lab": "The lab's name (namespace prefix); default: the scenario's name.",
    "ScenarioSpec.topology": "The topology: a file (relative to the scenario) or the topology itself inline.",
    "ScenarioSpec.overrides": "Topology fields replaced for this scenario (merged over the topology).",
    "ScenarioSpec.flows": "The traffic to send: each flow a number of connections from a member to a target.",
    "ScenarioSpec.expect": "What each flow must show: outcome, backends, hops, rules, verdict, goldens.",
    "ScenarioSpec.faults": "Misconfigurations applied after deploy (or after a flow), in order.",
    "ScenarioSpec.settle": "Seconds to let packets drain before the captures stop (0-5, default 0.2).",
    "ScenarioSpec.snaplen": "Bytes tcpdump keeps of each frame (default 512; every pcap says so).",
    "Flow.name": "The flow's name (lower-case, digits, '-').",
    "Flow.from": "The member that sends: a pod, an external or a node.",
    "Flow.to": "Where it goes: a pod, a Service (via ClusterIP, NodePort, load balancer or external IP), a "
               "node's NodePort, or an address and port.",
    "Flow.protocol": "TCP or UDP (default: the destination port's protocol).",
    "Flow.connections": "How many connections (each a new source port), 1 to 64.",
    "Flow.timeout": "Seconds each connection attempt may take.",
    "Flow.size": "Request bytes (default: the marker line alone).",
    "Flow.http": "Send an HTTP GET of this path instead of the marker line.",
    "Flow.command": "A container client's own command per connection ({dst} {port} {path} {timeout} {marker} "
                    "filled in).",
    "Flow.sourcePort": "UDP: every connection from this local port (one conntrack entry for all, as a "
                       "long-lived UDP client keeps).",
    "Target.pod": "A pod, directly (its address and port).",
    "Target.service": "A Service, as namespace/name (namespace default \"default\").",
    "Target.via": "How the Service is reached: clusterIP, nodePort, loadBalancer or externalIP.",
    "Target.node": "The node whose NodePort (via nodePort) or address is used.",
    "Target.nodePort": "A node's NodePort, directly.",
    "Target.address": "An address (with port), for traffic to something no other field names.",
    "Target.port": "The pod port, Service port or address port.",
    "Expectation.flow": "The flow this expectation is about.",
    "Expectation.reply": "Shorthand: true means outcome reply.",
    "Expectation.outcome": "What every connection must get: reply, refused, dropped (timed out) or no-reply.",
    "Expectation.backends": "The pods that must answer (every one of them, and no other).",
    "Expectation.hops": "Hops the connections must show, by capture point and tuple.",
    "Expectation.golden": "Compare the captures with goldens: true (scenarios/NAME/golden/) or a directory.",
    "Expectation.rules": "Lines the node's rules must contain after deploy.",
    "Expectation.died": "Where and why the unanswered connections died (the kernel's verdict).",
    "Expectation.httpStatus": "The HTTP status every connection must get (flows with http:).",
    "Expectation.bodyContains": "A substring every connection's answer must contain.",
    "HopExpect.at": "The capture point, member/interface (e.g. node1/cni0).",
    "HopExpect.direction": "request or reply.",
    "HopExpect.src": "The source seen there: IP or IP:PORT.",
    "HopExpect.dst": "The destination seen there: IP or IP:PORT.",
    "HopExpect.outer": "The outer header seen there: vxlan, ipip or none.",
    "RulesExpect.node": "The node whose rules are read.",
    "RulesExpect.kind": "Which dump: iptables-save, ipset, ipvs or nft.",
    "RulesExpect.contains": "Lines the dump must contain, each whole.",
    "RulesExpect.mode": "The kube-proxy mode these lines are for (iptables, ipvs or nftables): checked only "
                        "when the run's mode is that one (--proxy-mode). Unset: the topology's own mode.",
    "DiedExpect.at": "The member where it died (node, pod, external).",
    "DiedExpect.by": "What killed it: a chain (KUBE-EXTERNAL-SERVICES), a kernel function (tcp_v4_rcv), ...",
    "DiedExpect.reason": "Why: DROP, REJECT, a kernel drop reason (IP_RPFILTER, NO_SOCKET), port "
                         "unreachable, ...",
    "Fault.kind": "Which fault (kpemu faults lists them, with what each changes).",
    "Fault.node": "The node it is applied on.",
    "Fault.pod": "stale-rules, stale-conntrack: the pod that goes away.",
    "Fault.replacement": "stale-conntrack: the not-ready pod that becomes ready in its place.",
    "Fault.conntrackTool": "stale-conntrack: whether kube-proxy finds the conntrack tool (before 1.32 its UDP "
                           "cleanup runs it; 1.32+ uses netlink).",
    "Fault.after": "The flow after which it is applied (default: before the first flow).",
    "Fault.mtu": "mtu-mismatch: the smaller MTU.",
    "Fault.device": "mtu-mismatch: the node interface that gets it (default eth0).",
    "Fault.source": "rp-filter: the client prefix whose return route is sent astray (CIDR).",
    "Fault.limit": "conntrack-full: nf_conntrack_max, entries per namespace.",
}


def described(model: str, key: str) -> str | None:
    """The words for field `key` of `model` (by its YAML name), or None."""
    return DOCS.get(f"{model}.{key}")
