"""The flow tests' Prefect server: started for the first test of this package that asks for it,
stopped after the package's last test. Its start-up costs about 16 CPU s (imports and the
database's migrations) and it idles at about 2.5% of a core, so it does not outlive these tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pipeline_fixtures import running_prefect_server


@pytest.fixture(scope="package")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment a Prefect client needs to reach the server (PREFECT_API_URL, PREFECT_HOME)."""
    with running_prefect_server(tmp_path_factory.mktemp("prefect-home")) as env:
        yield env
