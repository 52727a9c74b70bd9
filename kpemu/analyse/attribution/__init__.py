"""Rule attribution (pure): each tracer's output read into per-packet hops, and each hop's change put
down to the rule, verdict-map element or IPVS decision that made it. One module per tracer
(`ProxyMode.trace`): `xtables-monitor --trace` (xtables), `nft monitor trace` (nft); what both say
from the ledger alone is in phrases."""
