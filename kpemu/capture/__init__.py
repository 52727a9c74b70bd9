"""Captures: which interfaces to listen on, tcpdump per interface, reading pcaps into packets."""
