"""kpemu: an emulated testbed for the Kubernetes Service data path."""

__version__ = "0.1.0"
