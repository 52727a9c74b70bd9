"""Everything that reads the files kpemu accepts: the bounded YAML reader (`yaml_reader`), topologies
as written or as Kubernetes objects (`topology`), and scenarios with their topology (`scenario`).

This floor sits above kpemu.model (the schema and its semantic checks, on data already read) and
kpemu.k8s (the conversion of Kubernetes objects), and may ask the planners what a lab will hold
(a scenario's capture points).
"""
