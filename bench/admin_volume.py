"""The admin at a year's volume: fill a database with bulk inserts, then open every page each role uses and
print the SQL queries and milliseconds of each.

    createdb: psql -h 127.0.0.1 -U postgres -c "create database scout_adminscale"
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/scout_adminscale DEBUG=1
    .venv/bin/python bench/admin_volume.py fill      # 10k tools on 50 servers, 300k audit events, ...
    .venv/bin/python bench/admin_volume.py measure   # one line per page and role: queries, ms
    .venv/bin/python bench/admin_volume.py measure dashboard/approvals   # only the pages whose URL has this
    .venv/bin/python bench/admin_volume.py pending 30000   # a backlog: that many more pending requests

``fill`` writes rows directly (bulk_create), not through the gateway: no reindex, no audit of its own. The
demo's role logins (admin, curator, approver, operator) are created with the password ``bench``.
"""

import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

# SCOUT_BENCH_ROOT: another checkout whose code serves the pages (main, for a before/after).
ROOT = Path(os.environ.get("SCOUT_BENCH_ROOT") or Path(__file__).resolve().parent.parent).resolve()

SERVERS, TOOLS_PER_SERVER = 50, 200
AUDIT_EVENTS, QUERY_LOG, APPROVALS, LEARNED, TENANTS = 300_000, 100_000, 5_000, 20_000, 5
BATCH = 5_000
REPEAT = int(os.environ.get("SCOUT_BENCH_REPEAT") or 1)  # visits timed per page: the median is printed
PASSWORD = "bench"


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import django

    django.setup()


def logins() -> dict[str, object]:
    """The demo's four logins, in their preset groups."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from governance.roles import APPROVERS, CURATORS, OPERATORS

    users = {}
    for name, group in (("admin", None), ("curator", CURATORS), ("approver", APPROVERS), ("operator", OPERATORS)):
        user, _ = get_user_model().objects.get_or_create(username=name, defaults={"email": f"{name}@localhost"})
        user.is_staff = user.is_active = True
        user.is_superuser = group is None
        user.set_password(PASSWORD)
        user.save()
        if group:
            user.groups.add(Group.objects.get(name=group))
        users[name] = user
    return users


def fill() -> None:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from catalog.models import Server, SyncRun, Tool, ToolRevision
    from governance.choices import ApprovalStatus, AuditEventType, AuditOutcome, OperationClass
    from governance.models import ApprovalRequest, AuditEvent, PolicyVersion, RiskClass, Tenant, ToolPolicy
    from governance.services.permissions import permission_grant
    from search.models import LearnedRequest, QueryLogEntry

    rng = random.Random(7)
    now = timezone.now()
    year = timedelta(days=365)
    users = logins()
    people = [
        get_user_model().objects.get_or_create(username=f"user{i:03d}", defaults={"email": f"u{i}@example.com"})[0]
        for i in range(200)
    ]
    tenants = [Tenant.objects.get_or_create(slug=f"tenant-{i}", defaults={"name": f"Tenant {i}"})[0] for i in range(5)]
    for i, person in enumerate(people):
        person.tenants.add(tenants[i % len(tenants)])
    policy, _ = PolicyVersion.objects.get_or_create(number=1, defaults={"reason": "bench"})
    risks = list(RiskClass.objects.all())

    servers = Server.objects.bulk_create(
        # Synced a minute ago: a server never synced is one the operator's home puts first and the dashboard flags.
        Server(
            slug=f"srv-{i:02d}",
            name=f"Server {i}",
            command="true",
            category=f"cat{i % 7}",
            last_synced_at=now - timedelta(minutes=1),
        )
        for i in range(SERVERS)
    )
    tools = []
    for server in servers:
        for j in range(TOOLS_PER_SERVER):
            name = f"{rng.choice(['get', 'list', 'create', 'delete', 'update'])}_thing_{j:03d}"
            tools.append(
                Tool(
                    server=server,
                    name=name,
                    tool_id=f"{server.slug}::{name}",
                    description=f"Does {name} on {server.name}",
                    input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
                    definition_hash=f"{rng.getrandbits(128):032x}",
                    first_seen_at=now - year,
                    last_seen_at=now,
                )
            )
    tools = Tool.objects.bulk_create(tools, batch_size=BATCH)
    ToolPolicy.objects.bulk_create(
        (
            ToolPolicy(
                tool=tool,
                operation_class=rng.choice(OperationClass.values),
                risk_class=rng.choice(risks),
                accepted_hash=tool.definition_hash,
            )
            for tool in tools
        ),
        batch_size=BATCH,
    )
    runs = SyncRun.objects.bulk_create(
        SyncRun(server=servers[i % SERVERS], status="success", started_at=now - year * (i / 2000), unchanged=200)
        for i in range(2000)
    )
    ToolRevision.objects.bulk_create(
        (
            ToolRevision(
                tool=tool,
                definition_hash=tool.definition_hash,
                definition=tool.upstream_definition(),
                created_at=tool.first_seen_at,
                sync_run=runs[k % len(runs)],
            )
            for k, tool in enumerate(tools)
        ),
        batch_size=BATCH,
    )
    for server in servers:
        permission_grant(actor=users["admin"], target=server, action="approve", holder=users["approver"])

    def when() -> object:
        return now - year * rng.random()

    ApprovalRequest.objects.bulk_create(
        (
            _approval_request(
                rng,
                f"apr_{i:08d}",
                people,
                tenants,
                tools,
                policy,
                status=ApprovalStatus.PENDING if i % 10 == 0 else rng.choice(ApprovalStatus.values),
                expires_at=now + timedelta(days=1),
                decided_by=users["approver"] if i % 10 else None,
            )
            for i in range(APPROVALS)
        ),
        batch_size=BATCH,
    )
    for _start in range(0, AUDIT_EVENTS, BATCH):
        batch = []
        for _ in range(BATCH):
            tool, person = rng.choice(tools), rng.choice(people)
            batch.append(
                AuditEvent(
                    created_at=when(),
                    event_type=rng.choice(AuditEventType.values),
                    outcome=rng.choice(AuditOutcome.values),
                    user=person,
                    human_subject=person.username,
                    tenant_scope=rng.choice([None, *tenants]),
                    target_server=tool.tool_id.split("::")[0],
                    tool=tool,
                    tool_ref=tool.tool_id,
                    policy_version=1,
                    payload={"arguments": {"id": "1"}},
                )
            )
        AuditEvent.objects.bulk_create(batch)
    for _start in range(0, QUERY_LOG, BATCH):
        batch = []
        for _ in range(BATCH):
            person = rng.choice(people)
            picked = rng.sample(tools, 5)
            batch.append(
                QueryLogEntry(
                    created_at=when(),
                    user=person,
                    principal_key=f"user:{person.pk}",
                    tenant=rng.choice([None, *tenants]),
                    log_mode="full",
                    query=f"please {rng.choice(['list', 'create', 'find'])} the thing {rng.randrange(1000)}",
                    results=[{"tool_id": t.tool_id, "score": 0.5} for t in picked],
                    confidence=rng.choice(["high", "low", "none"]),
                    latency_ms=rng.random() * 100,
                )
            )
        QueryLogEntry.objects.bulk_create(batch)
    LearnedRequest.objects.bulk_create(
        (
            LearnedRequest(
                tool=tools[i % len(tools)],
                text=f"learned request {i}",
                key=f"{i:064d}",
                confirmations=rng.randrange(1, 50),
                principal_count=rng.randrange(1, 10),
            )
            for i in range(LEARNED)
        ),
        batch_size=BATCH,
    )
    analyze()
    print(f"filled: {len(servers)} servers, {len(tools)} tools, {AUDIT_EVENTS} audit events, {QUERY_LOG} searches")


def _approval_request(rng, approval_id, people, tenants, tools, policy, **decision):
    """A request by one of ``people`` for one of ``tools`` (shared or in one of ``tenants``), ``decision`` its state."""
    from governance.choices import OperationClass, RiskLevel
    from governance.models import ApprovalRequest

    return ApprovalRequest(
        approval_id=approval_id,
        requester=rng.choice(people),
        tenant=rng.choice([None, *tenants]),
        tool=rng.choice(tools),
        tool_definition_hash="0" * 64,
        arguments_json='{"id": "1"}',
        arguments_digest="0" * 64,
        policy_version=policy,
        risk_class=rng.choice(RiskLevel.values),
        operation_class=OperationClass.WRITE,
        **decision,
    )


def pending() -> None:
    """Add ``sys.argv[2]`` pending, unexpired requests by the fill's people on random tools (an approver's backlog)."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from catalog.models import Tool
    from governance.choices import ApprovalStatus
    from governance.models import ApprovalRequest, PolicyVersion, Tenant

    count = int(sys.argv[2])
    rng = random.Random(11)
    start = ApprovalRequest.objects.count()
    people = list(get_user_model().objects.filter(username__startswith="user"))
    tenants = list(Tenant.objects.all())
    tools = list(Tool.objects.only("pk"))
    policy = PolicyVersion.objects.get(number=1)
    expires = timezone.now() + timedelta(days=365)
    ApprovalRequest.objects.bulk_create(
        (
            _approval_request(
                rng,
                f"apr_backlog_{start + i:08d}",
                people,
                tenants,
                tools,
                policy,
                status=ApprovalStatus.PENDING,
                expires_at=expires,
            )
            for i in range(count)
        ),
        batch_size=BATCH,
    )
    analyze()
    print(f"added {count} pending requests")


def analyze() -> None:
    """Refresh the planner's statistics: autovacuum analyzes a table only after a while, and pages measured right
    after a bulk fill were planned for the empty tables (nested loops over 300k rows)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def pages(user) -> list[str]:
    """Every admin page ``user`` may open: home, dashboards, workbench, each changelist (and its search), and
    the change page of each model's first row."""
    from django.contrib import admin
    from django.test import RequestFactory
    from django.urls import reverse

    request = RequestFactory().get("/admin/")
    request.user = user
    urls = [
        "/admin/",
        "/admin/dashboard/",
        "/admin/dashboard/approvals/",
        "/admin/search/workbench/",
        "/admin/search/workbench/tools/",
    ]
    for model, model_admin in sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label):
        if not model_admin.has_view_permission(request):
            continue
        info = model._meta.app_label, model._meta.model_name
        changelist = reverse("admin:{}_{}_changelist".format(*info))
        urls.append(changelist)
        if model_admin.get_search_fields(request):
            urls.append(changelist + "?q=thing")
        first = model_admin.get_queryset(request).order_by().values_list("pk", flat=True).first()
        if first is not None:
            urls.append(reverse("admin:{}_{}_change".format(*info), args=[first]))
    return urls


def measure() -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    only = sys.argv[2:]
    for name, user in logins().items():
        client = Client()
        client.force_login(user)
        for url in pages(user):
            if only and not any(part in url for part in only):
                continue
            client.get(url)  # warm caches (visible sets, templates) as a second visit finds them
            times = []
            for _ in range(REPEAT):
                with CaptureQueriesContext(connection) as queries:
                    started = time.perf_counter()
                    response = client.get(url)
                    times.append((time.perf_counter() - started) * 1000)
            ms = sorted(times)[len(times) // 2]
            print(f"{name:9} {response.status_code} {len(queries):4d} q {ms:8.0f} ms  {url}", flush=True)


if __name__ == "__main__":
    setup()
    {"fill": fill, "measure": measure, "pending": pending}[sys.argv[1]]()
