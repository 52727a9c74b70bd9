"""Fixtures of the integration tests (real namespaces, as root)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kpemu.kernel import netns as nsmod


@pytest.fixture
def scratch(request: pytest.FixtureRequest) -> Iterator[str]:
    """A throwaway network namespace for one test, named after its module (kp-it-<module>), deleted after."""
    name = "kp-it-" + request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    nsmod.create_netns(name)
    try:
        yield name
    finally:
        nsmod.delete_netns(name)
    assert name not in nsmod.list_netns(name)
