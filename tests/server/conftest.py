"""Fixtures of the server tests: one scripted-engine server and its ``openai`` client a module.

A module that needs another server (another engine, an upstream) defines its own ``url``.
"""

from __future__ import annotations

from collections.abc import Iterator

import openai  # noqa: TID253
import pytest

from factorspec_sdk.server import create_app
from tests.server.helpers import MODEL, running, scripted_engine


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A real server on a free loopback port, serving a scripted engine, for one module."""
    with running(create_app(scripted_engine(), model_name=MODEL)) as base:
        yield base


@pytest.fixture(scope="module")
def client(url: str) -> openai.OpenAI:
    """The official ``openai`` client of ``url`` (no retries: a failure shows at once)."""
    return openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
