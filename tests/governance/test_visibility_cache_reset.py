"""governance.cache.visibility_cache_reset: a new cache generation, through the process's one cache backend."""

import contextvars

import pytest

from governance.cache import visibility_cache_reset, visibility_version

pytestmark = pytest.mark.django_db


def test_each_reset_is_a_new_version_over_one_connection(redis_connects):
    """The reset wrote through Django's per-context ``cache``: a new backend and Redis connection in every context it
    ran in, while the version it renews is read through the process's one backend. Both now use that one."""
    versions = []
    for _ in range(4):
        contextvars.Context().run(visibility_cache_reset)
        versions.append(visibility_version())

    assert None not in versions and len(set(versions)) == 4
    assert len(redis_connects) == 1
