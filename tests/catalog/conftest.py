from tests.catalog.servers.fixtures import git_repo, http_upstream, make_server, scripted  # noqa: F401
