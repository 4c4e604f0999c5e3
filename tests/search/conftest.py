"""Search fixtures: one model load per test session, a clean index state per test, a small catalog."""

import gc
from collections.abc import Callable, Iterator

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.test import override_settings

from catalog.models import Tool
from search.backends import SearchBackend, backend_get, backends_reset
from search.encoder import Encoder, encoder_forget_failures, encoder_get
from search.events import search_events_reset
from search.models import IndexGeneration
from search.services import index_rebuild

from .factories import ServerFactory, ToolFactory, add_examples
from .fake_weaviate import FakeWeaviate


@pytest.fixture(scope="session")
def encoder() -> Encoder:
    """The real model, loaded once for the whole session (slow on 2 cores). Then what is alive (Django, the
    model) is moved out of the garbage collector's full passes, as a gateway does after its warm-up
    (mcpgateway.server.gateway_warm_up): each index build's full collection (search.backends.embedded
    release_memory) walked it all, ~0.5 s a build in this process."""
    loaded = encoder_get()
    gc.collect()
    gc.freeze()
    return loaded


@pytest.fixture(autouse=True)
def clean_search_state():
    """Per-process index state must not outlive the test's database transaction."""
    cache.clear()
    backends_reset()
    search_events_reset()
    encoder_forget_failures()
    yield
    cache.clear()
    backends_reset()


@pytest.fixture(scope="module")
def indexed_catalog(django_db_setup, django_db_blocker, encoder) -> Iterator[dict[str, int]]:
    """``small_catalog`` and its index, built and committed once for a module (test_preview.py, test_ranking.py):
    built per test, it encoded every tool (~0.5 s of CPU) after creating them (~0.8 s), in each of their 40 tests.
    Every test still runs in its own transaction, rolled back: what one adds, grants, holds or reindexes is gone
    for the next, and the process's search state (snapshot, caches) is reset around each (clean_search_state).
    Emptied as a transactional test's database is (flush) once the module is done. A module using it has no test
    that makes ``small_catalog`` itself or needs no index (test_preview_no_index.py)."""
    with django_db_blocker.unblock():
        tools = small_catalog_create()
        index_rebuild()  # autocommit: its publication runs on its own commit
        yield {name: tool.pk for name, tool in tools.items()}
        call_command("flush", verbosity=0, interactive=False)
    cache.clear()
    backends_reset()


@pytest.fixture
def indexed(indexed_catalog, db) -> dict[str, Tool]:
    """The module's indexed catalog, read afresh for each test (no instance shared between tests)."""
    rows = Tool.objects.in_bulk(indexed_catalog.values())
    return {name: rows[pk] for name, pk in indexed_catalog.items()}


@pytest.fixture
def reindex(django_capture_on_commit_callbacks) -> Callable[..., IndexGeneration]:
    """Run an indexing service and its on-commit publication, as a committed transaction would."""

    def run(service: Callable[..., IndexGeneration], **kwargs: object) -> IndexGeneration:
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return run


@pytest.fixture
def fake() -> Iterator[FakeWeaviate]:
    """An in-process fake Weaviate server (fake_weaviate.py) the real weaviate client talks to."""
    server = FakeWeaviate().start()
    yield server
    server.stop()


@pytest.fixture
def weaviate_backend(fake: FakeWeaviate) -> Iterator[SearchBackend]:
    """The configured search backend is Weaviate, on ``fake``: the services (index_rebuild, search_for_principal)
    publish to it and search through it. Reset before and after; the fake's stalls are released at the end."""
    overrides = {
        "SCOUT_SEARCH_BACKEND": "weaviate",
        "WEAVIATE_URL": fake.url,
        "WEAVIATE_GRPC_URL": fake.grpc_url,
        "SCOUT_WEAVIATE_DROP_GRACE_SECONDS": 0,
        "SCOUT_WEAVIATE_RETRY_SECONDS": 0.1,
        "SCOUT_WEAVIATE_TIMEOUT": 5.0,
    }
    with override_settings(**overrides):
        backend = backend_get()
        backend.reset()
        yield backend
        fake.release.set()
        if fake.pause_builds is not None:
            fake.pause_builds.set()
        backend.reset()


def _params(*names: str, required: tuple[str, ...] = ()) -> dict:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": name.replace("_", " ")} for name in names},
        "required": list(required),
    }


@pytest.fixture
def small_catalog(db) -> dict[str, object]:
    """Twelve self-made tools on four servers, with confusable neighbours."""
    return small_catalog_create()


def small_catalog_create() -> dict[str, object]:
    """The tools of ``small_catalog``, for a fixture of a wider scope (tests/search/test_preview.py)."""
    mail = ServerFactory(slug="mail", name="Mail", description="Send and read email messages")
    files = ServerFactory(slug="files", name="Filesystem", description="Local files and directories")
    weather = ServerFactory(slug="weather", name="Weather", description="Forecasts and current conditions")
    tracker = ServerFactory(slug="tracker", name="Issue Tracker", description="Project issues and tickets")
    specs = [
        (mail, "send_email", "Send an email message to one or more recipients.", ("to", "subject", "body")),
        (mail, "list_inbox", "List the newest messages in the inbox.", ("folder",)),
        (mail, "delete_email", "Delete an email message by its id.", ("message_id",)),
        (files, "read_file", "Read the complete contents of a file from disk.", ("path",)),
        (files, "write_file", "Create a new file or overwrite an existing file with content.", ("path", "content")),
        (files, "list_directory", "List the files and folders inside a directory.", ("path",)),
        (files, "move_file", "Move or rename a file or directory.", ("source", "destination")),
        (weather, "get_forecast", "Weather forecast for the next days at a location.", ("latitude", "longitude")),
        (weather, "get_alerts", "Active severe weather alerts for a US state.", ("state",)),
        (tracker, "create_issue", "Open a new issue in a project with a title and body.", ("project", "title")),
        (tracker, "close_issue", "Close an existing issue.", ("issue_id",)),
        (tracker, "search_issues", "Search issues by text, label or assignee.", ("query",)),
    ]
    tools = {}
    for server, name, description, params in specs:
        tools[name] = ToolFactory(
            server=server, name=name, description=description, input_schema=_params(*params, required=params[:1])
        )
    add_examples(tools["get_alerts"], "is there a storm warning near me")
    return tools


@pytest.fixture
def curator(django_user_model):
    """A curator as the workbench needs one: may change tools and read the query log (no tenant)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(username="curator", is_staff=True)
    for app, codename in (("catalog", "view_tool"), ("catalog", "change_tool"), ("search", "view_querylogentry")):
        user.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label=app))
    return user
