import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def clean_cache():
    """The search generation token is cached per process: start and end every test without it."""
    cache.clear()
    yield
    cache.clear()


from tests.catalog.servers.fixtures import make_server, scripted  # noqa: E402,F401 - shared fixtures
from tests.governance.conftest import grant, member_token, mutating_tool, server, tool  # noqa: E402,F401 - shared fixtures
