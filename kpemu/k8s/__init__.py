"""Kubernetes objects as input: kubectl output or manifests (Nodes, Pods, Services,
EndpointSlices, Endpoints, KubeProxyConfiguration) read, defaulted and validated the way the API
server does, and turned into an equivalent kpemu topology. Pure code."""
