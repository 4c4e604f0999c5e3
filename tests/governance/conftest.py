"""Governance test helpers: grants through the real services, principals through real tokens."""

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from governance.principals import Principal, principal_for_user
from governance.services.permissions import permission_grant
from tests.governance.factories import ServerFactory, ToolFactory, in_days


@pytest.fixture
def grant(superuser):
    """grant(holder, target, *actions): grant through the audited service, as the superuser."""

    def _grant(holder, target, *actions: str):
        for action in actions or ("discover", "execute"):
            permission_grant(actor=superuser, target=target, action=action, holder=holder)

    return _grant


@pytest.fixture
def server(db):
    return ServerFactory(slug="github")


@pytest.fixture
def tool(server):
    return ToolFactory(server=server, name="list_issues")


@pytest.fixture
def mutating_tool(server):
    """A tool without annotations: mutating, irreversible, high risk, so every call needs approval."""
    return ToolFactory(server=server, name="delete_repo", description="Deletes a repository.", annotations=None)


def classify(policy, *, actor, operation_class: str, reversibility: str, risk: str, **fields):
    """An admin's classification of ``policy`` at the seeded risk class named ``risk``; no environments or data
    classes unless ``fields`` gives them (or a ``classification_note``)."""
    from governance.models import RiskClass
    from governance.services.policy import tool_policy_classify

    fields = {"allowed_environments": [], "data_classes": [], **fields}
    risk_class = RiskClass.objects.get(name=risk)
    return tool_policy_classify(
        policy=policy,
        actor=actor,
        operation_class=operation_class,
        reversibility=reversibility,
        risk_class=risk_class,
        **fields,
    )


def as_principal(user, **kwargs) -> Principal:
    return principal_for_user(user, **kwargs)


@pytest.fixture
def member_token(member):
    """A real API token for ``member`` (agent "triage-agent", not narrowed, no tenant), verified into a principal."""
    from governance.services.tokens import api_token_create, api_token_verify
    from tests.governance.factories import agent_of

    token, raw = api_token_create(
        user=member,
        name="member token",
        agent=agent_of(member, "triage-agent", all_user_tools=True),
        scopes=["discover", "execute"],
        expires_at=in_days(30),
    )
    principal = api_token_verify(raw)
    assert principal is not None
    return token, raw, principal


@pytest.fixture
def acme_token(member):
    """A token for ``member`` acting in tenant "acme" through agent "acme-triage" (not narrowed)."""
    from tests.governance.factories import tenant_token

    return tenant_token(member, "acme")


@contextmanager
def _receiving():
    """A real HTTP endpoint on 127.0.0.1 that records what it is sent: yields its URL and the (headers, body) list."""
    received: list[tuple[dict, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()


@pytest.fixture
def receiver():
    """A real HTTP endpoint on 127.0.0.1 that records what it is sent (the install-wide webhook in tests)."""
    with _receiving() as endpoint:
        yield endpoint


@pytest.fixture
def tenant_receiver():
    """A second endpoint like ``receiver``: a tenant's own approval webhook."""
    with _receiving() as endpoint:
        yield endpoint


@pytest.fixture
def pending_approval(member_token, approver, grant, server, mutating_tool):
    """A call of ``mutating_tool`` (high risk: it waits) by ``member_token``'s principal, pending, which ``approver``
    may decide."""
    from governance.services.approvals import approval_request_create

    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    return approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "repo"})
