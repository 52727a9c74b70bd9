"""What changes in kube-proxy's rule text from one release to the next (1.10 through 1.37).

`flavour_for(settings)` turns the topology's `kubeProxy` block into a frozen `Flavour`: one
boolean / value per change, so the generators (kpemu.proxy.iptables, kpemu.proxy.ipvs) never
compare version numbers themselves. Toggle names follow reference/kube-proxy.md section 9.1 (T1..T21), the
timeline of section 4 and the intermediate eras of section 4.1.

Seed 001 (seeds/001_717fa8e2866a1a64.txt) was produced by kube-proxy **1.14** (see
SEED_001_EVIDENCE). Evidence, from kube-proxy source copies found in public repositories:

* KUBE-SVC / KUBE-SEP rules without `-m comment`: PR #65755 (merged 2018-07, first in 1.12) added
  `appendServiceCommentLocked(args, svcName)` that does `args = append(...)` and returns nothing,
  so the comment is silently lost (PR #81563, 2019-08, describes it as "plain dead code" and was
  closed unmerged). Copies of proxier.go with `%0.10f` probabilities, EndpointSlice (discovery
  v1beta1), KUBE-PROXY-CANARY and klog v1 (i.e. 1.17) still have the void version; the 1.18-era
  form returns `[]string`, and 1.18 node dumps show `-m comment --comment "ns/svc:"` on SVC rules
  again. So comments are missing on SVC->SEP and SEP rules in 1.12-1.17.
* filter jumps: the 1.14+ `iptablesJumpChains` list is
  [INPUT->KUBE-EXTERNAL-SERVICES (NEW), FORWARD->KUBE-SERVICES (NEW), OUTPUT->KUBE-SERVICES (NEW),
  INPUT->KUBE-SERVICES (NEW), FORWARD->KUBE-FORWARD, nat OUTPUT, nat PREROUTING, nat POSTROUTING];
  each is prepended, giving exactly the seed's INPUT (SERVICES, EXTERNAL-SERVICES, kubelet
  FIREWALL), FORWARD (KUBE-FORWARD, SERVICES) and OUTPUT order. INPUT->KUBE-SERVICES was re-added by
  PR #74394 (early 2019, 1.14) and removed by PR #95252 (1.20); pre-1.14 nodes show INPUT with
  only KUBE-EXTERNAL-SERVICES and no FORWARD->KUBE-SERVICES.
* KUBE-FORWARD has only the mark ACCEPT rule: the INVALID DROP (PR #74840) was still open on
  2019-04-15 (kube-router issue #709 links the unmerged commit), so it first shipped in 1.15
  (1.14 was released 2019-03-25); the pod source/destination conntrack rules are only written when
  a cluster CIDR is configured (minikube had none), and likewise the ClusterIP masquerade rule.
* one-rule KUBE-POSTROUTING (xor-mark is 1.19), no `--random-fully` (1.16), KUBE-MARK-DROP and the
  kubelet mark-drop KUBE-FIREWALL without the localnet rule (1.19): all consistent with 1.14.
  The probability is written `0.50000` (1.14 uses "%0.5f") and saved as 0.50000000000.
Caveat: 1.14.x patch releases may have received cherry-picks (e.g. of PR #74840); the seed
matches 1.14.0 and any 1.14.z without them. 1.12/1.13 differ only in the filter jumps.

Releases 1.30-1.37 (NEWEST_RELEASE_EVIDENCE): the newest release is 1.37. CHANGELOG-1.38.md in
kubernetes/kubernetes lists v1.38.0-alpha.1 "Changelog since v1.37.0" and nothing past
v1.38.0-alpha.2, so 1.37.z is the newest kube-proxy a cluster runs.

* nfacct (T12/T15), pkg/proxy/iptables/proxier.go: `nfAcctCounters` holds
  `metrics.IPTablesCTStateInvalidDroppedNFAcctCounter` ("ct_state_invalid_dropped_pkts", 1.30,
  PR #122812) and `metrics.LocalhostNodePortAcceptedNFAcctCounter` ("localhost_nps_accepted_pkts",
  1.31, PR #125015). Each is `nfacct.New()` + `Ensure(name)` at startup; a counter that could not be
  created is logged ("Failed to create nfacct counter; the corresponding metric will not be
  updated") and its `-m nfacct --nfacct-name` match is left out. The INVALID drop becomes
  `-m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP`;
  the localhost NodePort twin rule (`-d 127.0.0.0/8 --dport NP -m nfacct --nfacct-name
  localhost_nps_accepted_pkts -j KUBE-EXT-H`, just before the ordinary NodePort rule) is written
  only with localhostNodePorts, IPv4 and endpoints. Upstream's fake proxier sets both counters
  true, so `TestOverallIPTablesRules` (proxier_test.go) expects all four nfacct lines; kpemu's
  `kubeProxy.nfacct` is None by default = kube-proxy's behaviour (use them when the kernel can).
* 1.34, 1.35, 1.36, 1.37 - iptables mode: no rule-text change. The expected text of
  `TestOverallIPTablesRules` and `sortIPTablesRules` in proxier_test.go (klogtesting era, with
  the nfacct lines) is what kpemu produces for 1.31+ (tests/unit/test_upstream_iptables.py, 91
  of 91 lines); the 1.34+ work in pkg/proxy went to nftables mode (reference
  kube-proxy-nftables.md 5.1/5.2). Not in a release: a Backend refactor on a fork branch
  (danwinship/kubernetes pkg/proxy/iptables/backend.go `NewBackend`) creates the counters once at
  startup, but its `nfAcctCounters := sets.New[string]()` inside the `if` shadows the outer set,
  so as written it would pass no counters and drop every `-m nfacct`; if that lands in a
  release, that release is a new boundary here.
* 1.34-1.37 - IPVS mode: no rule, ipset or virtual-server change found in pkg/proxy/ipvs (proxier.go,
  ipset/). 1.35 deprecates it (KEP-5495, PR #134539): cmd/kube-proxy/app/server_linux.go logs
  `logger.Error(nil, "The ipvs proxier is now deprecated and may be removed in a future release.
  Please use 'nftables' instead.")` and records a Warning event (reason "IPVSDeprecation", action
  "StartKubeProxy"). That is startup behaviour, not node state: `Flavour.ipvs_deprecated` carries
  it and `kpemu rules` prints the message on stderr (IPVS_DEPRECATION). 1.37 adds the
  `KubeProxyIPVS` feature gate (on by default; the documented plan is off by default in 1.40 and
  removal in 1.43) and a kubeadm warning (CHANGELOG-1.37, PR #139067); both leave 1.37's rules as
  they are.
* nftables mode (kpemu.proxy.nftables.eras, modelled 1.29-1.36): 1.36 is a boundary. PR #135800
  (CHANGELOG-1.36, v1.36.0: "Improved CPU usage in the nftables mode of kube-proxy when loading very
  large rulesets") drops the mark-for-masquerade chain for inline `mark set mark or M`; PR #136499
  adds the `hairpin-connections` set and its `ct status dnat` masquerade rule, one ClusterIP
  masquerade rule in `services`, and DNAT maps in the policy chains (endpoint chains only for
  ClientIP affinity). Test of record: TestOverallNFTablesRules at kubernetes/kubernetes@edca5633
  (tests/data/nftables/overall-1.36-expected.nft); a v1.36.2 node's listing shows the same rules.
  1.37 changes single-endpoint Services again (PR #140723, "avoid numgen map for single-endpoint
  service DNAT", in the v1.37.0-rc.0 change list; its IPv6 crash fixed by PR #140960 before 1.37
  shipped); the fixed rule text is not in any source found, so nftables mode stops at 1.36.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol

from kpemu.model.topology import NEWEST_MINOR as NEWEST
from kpemu.model.topology import OLDEST_MINOR as OLDEST


class _Settings(Protocol):
    """The parts of kpemu.model.topology.KubeProxy that select a flavour."""

    version: str
    randomFully: bool | None
    localhostNodePorts: bool
    nfacct: bool | None


@dataclass(frozen=True)
class Flavour:
    """Rule-text toggles for one kube-proxy release (plus the settings that alter them)."""

    minor: int

    # --- iptables mode ------------------------------------------------------------------
    port_name_colon: bool  # T1: unnamed port S = "ns/svc:" (<1.19)
    probability_fmt: str  # T2: "%0.5f" (<1.17) or "%0.10f"
    xor_mark: bool  # T3: KUBE-POSTROUTING RETURN / --xor-mark / MASQUERADE (1.19+)
    random_fully: bool  # T4 resolved: capable and (settings.randomFully, default: assume supported)
    kubelet_mark_drop: bool  # T5/T6: kubelet's nat KUBE-MARK-DROP + filter KUBE-FIREWALL mark-drop rule (<1.28)
    kubelet_localnet_rule: bool  # T21: kubelet KUBE-FIREWALL "block incoming localnet connections" (1.19+)
    proxy_kube_firewall: bool  # T6: kube-proxy writes filter KUBE-FIREWALL itself (1.28+)
    masq_in_svc_chain: bool  # T7: ClusterIP masq rule is the first rule of KUBE-SVC (1.21+)
    ext_chains: bool  # T8/T9/T18: KUBE-EXT + KUBE-SVL instead of KUBE-XLB (1.24+)
    proxy_firewall: bool  # T10/T18: filter KUBE-PROXY-FIREWALL, FW chain ends in a no-target rule (1.25+)
    sep_arrow_comment: bool  # T11: SVC->SEP comment "S -> ip:port" (1.24+)
    endpoint_comments: bool  # SVC->SEP and SEP rules carry "-m comment" (not 1.12-1.17: PR #65755 bug)
    forward_invalid_drop: bool  # T12: KUBE-FORWARD INVALID DROP (1.15+, PR #74840)
    forward_pod_rules_cidr: bool  # T12: "pod source/destination rule" with -s/-d clusterCIDR (<1.18)
    forward_pod_rules: bool  # T12: the two pod source/destination conntrack rules (<1.24)
    forward_single_conntrack: bool  # T12: single "forwarding conntrack rule" (1.24+)
    nfacct: bool  # resolved: nfacct counters in use (capable, and settings.nfacct not False)
    nfacct_capable: bool  # 1.30+: -m nfacct on the INVALID drop (and 1.31+ localhost NodePorts)
    nfacct_localhost_nodeports: bool  # T15: 1.31+ "-d 127.0.0.0/8 ... -m nfacct" twin NodePort rule
    input_services_jump: bool  # T13: filter INPUT -> KUBE-SERVICES (1.14-1.19; PR #74394 / #95252)
    forward_services_jump: bool  # T13: filter FORWARD -> KUBE-SERVICES (1.14+)
    lb_reject_external: bool  # LB IPs without endpoints REJECTed in KUBE-EXTERNAL-SERVICES (1.20+, else KUBE-SERVICES)
    or_mark: bool  # KUBE-MARK-MASQ written as --or-mark (1.19+; before: --set-xmark M/M)
    xlb_local_rules: bool  # KUBE-XLB "masquerade/route LOCAL traffic for S LB IP" rules (1.22-1.23)
    xlb_balancing_comment: bool  # KUBE-XLB rules commented "Balancing rule i for S" (<1.23)
    to_cidr: bool  # restore input writes /32 on -d/-s host addresses (utilproxy.ToCIDR, <1.23)
    forward_external_services_jump: bool  # T13: filter FORWARD -> KUBE-EXTERNAL-SERVICES (1.20+)
    health_check_jump: bool  # filter INPUT -> KUBE-NODEPORTS "health check service ports" (1.22+)
    external_ip_legacy: bool  # T14: pre-1.21 externalIP form (MARK-MASQ + physdev/addrtype jumps)
    localhost_nodeport_masq: bool  # T15: "-s 127.0.0.0/8 ... -j KUBE-MARK-MASQ" for eTP=Local (<1.24)
    route_localnet_always: bool  # T16: route_localnet=1 unconditionally (<1.24)
    canary: bool  # T17: KUBE-PROXY-CANARY chains in mangle/nat/filter (1.16+)
    large_cluster_mode: bool  # T20: >1000 endpoints drops per-endpoint comments (1.23+)
    localhost_nodeports_flag: bool  # --iptables-localhost-nodeports honoured (1.25+; earlier always on)
    localhost_nodeports: bool  # resolved: localhost NodePorts allowed (flag, or always before 1.25)

    # --- IPVS mode ----------------------------------------------------------------------
    ipvs_nat_firewall: bool  # LB source ranges via nat KUBE-FIREWALL + KUBE-MARK-DROP (1.11-1.24)
    ipvs_proxy_firewall: bool  # filter KUBE-PROXY-FIREWALL / KUBE-SOURCE-RANGES-FIREWALL (1.25+)
    ipvs_filter: bool  # filter KUBE-IPVS-FILTER + KUBE-IPVS-IPS ipset (1.26+)
    loopback_return: bool  # "-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN" in IPVS nat (1.26+)
    ipvs_out_filter: bool  # filter KUBE-IPVS-OUT-FILTER (1.29+)
    ipvs_postrouting_masq_first: bool  # legacy IPVS: mark MASQUERADE before the LOOP-BACK rule (<1.19)
    ipvs_localhost_nodeport_vs: bool  # IPVS NodePort VS on 127.0.0.1 too (<1.22)
    ipvs_etp_local_fallback: bool  # IPVS eTP=Local VS without local endpoints uses all of them (1.21+, PR #97081)
    ipvs_route_localnet: bool  # IPVS sets route_localnet=1 (<1.22)
    conn_reuse_mode_zero: bool  # IPVS sets net/ipv4/vs/conn_reuse_mode=0 (1.13+, only kernel < 5.9)
    ipvs_deprecated: bool  # 1.35+: kube-proxy logs IPVS_DEPRECATION at startup (KEP-5495)

    @property
    def version(self) -> str:
        return f"1.{self.minor}"

    def probability(self, n: int) -> str:
        """computeProbability(n): 1/n in this release's format."""
        return self.probability_fmt % (1.0 / n)

    def as_dict(self) -> dict[str, object]:
        """Every toggle by name (for reports and debugging)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


IPVS_DEPRECATION = ("The ipvs proxier is now deprecated and may be removed in a future release. "
                    "Please use 'nftables' instead.")


def minor_of(version: str) -> int:
    """"1.18" / "v1.18.3" -> 18; raises ValueError outside the modelled releases."""
    parts = str(version).lstrip("v").split(".")
    minor = int(parts[1])
    if parts[0] != "1" or not OLDEST <= minor <= NEWEST:
        raise ValueError(f"kube-proxy release 1.{OLDEST}..1.{NEWEST} expected, got {version!r}")
    return minor


def flavour_for_minor(
    minor: int, *, random_fully: bool | None = None, localhost_nodeports: bool = True,
    nfacct: bool | None = None,
) -> Flavour:
    """The toggles of release 1.<minor>; `random_fully` / `nfacct` None = assume the node supports it."""
    if not OLDEST <= minor <= NEWEST:
        raise ValueError(f"kube-proxy release 1.{OLDEST}..1.{NEWEST} expected, got 1.{minor}")
    m = minor
    capable = m >= 16
    return Flavour(
        minor=m,
        port_name_colon=m < 19,
        probability_fmt="%0.5f" if m < 17 else "%0.10f",
        xor_mark=m >= 19,
        random_fully=capable and (True if random_fully is None else random_fully),
        kubelet_mark_drop=m < 28,
        kubelet_localnet_rule=m >= 19,
        proxy_kube_firewall=m >= 28,
        masq_in_svc_chain=m >= 21,
        ext_chains=m >= 24,
        proxy_firewall=m >= 25,
        sep_arrow_comment=m >= 24,
        endpoint_comments=not 12 <= m <= 17,
        forward_invalid_drop=m >= 15,
        forward_pod_rules_cidr=m < 18,
        forward_pod_rules=m < 24,
        forward_single_conntrack=m >= 24,
        nfacct=m >= 30 and nfacct is not False,
        nfacct_capable=m >= 30,
        nfacct_localhost_nodeports=m >= 31,
        input_services_jump=14 <= m < 20,
        forward_services_jump=m >= 14,
        lb_reject_external=m >= 20,
        or_mark=m >= 19,
        xlb_local_rules=22 <= m < 24,
        xlb_balancing_comment=m < 23,
        to_cidr=m < 23,
        forward_external_services_jump=m >= 20,
        health_check_jump=m >= 22,
        external_ip_legacy=m < 21,
        localhost_nodeport_masq=m < 24,
        route_localnet_always=m < 24,
        canary=m >= 16,
        large_cluster_mode=m >= 23,
        localhost_nodeports_flag=m >= 25,
        localhost_nodeports=localhost_nodeports if m >= 25 else True,
        ipvs_nat_firewall=m < 25,
        ipvs_proxy_firewall=m >= 25,
        ipvs_filter=m >= 26,
        loopback_return=m >= 26,
        ipvs_out_filter=m >= 29,
        ipvs_postrouting_masq_first=m < 19,
        ipvs_localhost_nodeport_vs=m < 22,
        ipvs_etp_local_fallback=m >= 21,
        ipvs_route_localnet=m < 22,
        conn_reuse_mode_zero=m >= 13,
        ipvs_deprecated=m >= 35,
    )


def flavour_for(settings: _Settings) -> Flavour:
    """The Flavour for a topology's `kubeProxy` block (version, randomFully, localhostNodePorts, nfacct)."""
    return flavour_for_minor(
        minor_of(settings.version),
        random_fully=settings.randomFully,
        localhost_nodeports=settings.localhostNodePorts,
        nfacct=settings.nfacct,
    )
