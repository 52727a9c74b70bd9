"""Container members: a docker engine to talk to (the host's, or kpemu's own private dockerd), the
locally built test image, and containers whose network namespaces kpemu wires like bare ones."""
