"""Prepare the load suite's throwaway SQLite database: the two mock upstreams synced for real, users with
disjoint grants (the L2 oracle), a burst token (L3), a slow-upstream caller (L4), the search index built.
Writes the tokens and each user's allowed tool ids to ``--out`` (JSON) for the locustfile.

Run by run_load.py with the gateway's settings in the environment (SQLITE_PATH etc.).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(os.environ.get("SCOUT_BENCH_ROOT") or Path(__file__).resolve().parents[2]).resolve()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mock-url", required=True)
    parser.add_argument("--slow-url", required=True)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    args.out = str(Path(args.out).resolve())  # before the working directory changes

    sys.path.insert(0, str(ROOT))
    # Celery's Django fixup puts the working directory first on sys.path at setup: from ROOT, ROOT's code is
    # imported, not the code of the directory this was run from.
    os.chdir(ROOT)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from catalog.models import Server, Tool
    from catalog.services.sync import server_sync
    from governance.services.permissions import permission_grant
    from governance.services.tokens import api_token_create
    from search.services import index_rebuild

    call_command("migrate", verbosity=0)
    User = get_user_model()
    admin, _ = User.objects.get_or_create(username="load-admin", defaults={"is_staff": True, "is_superuser": True})
    servers = {}
    for slug, url in (("mock", args.mock_url), ("slowpoke", args.slow_url)):
        server, _ = Server.objects.update_or_create(slug=slug, defaults={"name": slug, "transport": "http", "url": url})
        run = server_sync(server_pk=server.pk, trigger="load")
        assert run.status in ("success", "partial"), (slug, run.status, run.error)
        servers[slug] = server
    tools = list(Tool.objects.filter(server=servers["mock"], removed_at__isnull=True).order_by("name"))
    per_user = max(1, len(tools) // args.users)
    expires = timezone.now() + timedelta(hours=6)

    def token(user, scopes):
        return api_token_create(user=user, name=f"load {user.username}", scopes=scopes, expires_at=expires)[1]

    agents = []
    for index in range(args.users):
        user, _ = User.objects.get_or_create(username=f"load-agent-{index:03d}")
        mine = tools[index * per_user : (index + 1) * per_user]  # disjoint: no tool is granted to two agents
        for tool in mine:
            for action in ("discover", "execute"):
                permission_grant(actor=admin, target=tool, action=action, holder=user)
        agents.append(
            {
                "token": token(user, ["discover", "execute", "api"]),
                "allowed": [tool.tool_id for tool in mine],
                "queries": [tool.description for tool in mine],
            }
        )
    slow_user, _ = User.objects.get_or_create(username="load-slow")
    for action in ("discover", "execute"):
        permission_grant(actor=admin, target=servers["slowpoke"], action=action, holder=slow_user)
    slow_tool = Tool.objects.filter(server=servers["slowpoke"], removed_at__isnull=True).order_by("name").first()
    burst_user, _ = User.objects.get_or_create(username="load-burst")
    index_rebuild()
    Path(args.out).write_text(
        json.dumps(
            {
                "agents": agents,
                "all_tool_ids": sorted(Tool.objects.filter(removed_at__isnull=True).values_list("tool_id", flat=True)),
                "slow": {"token": token(slow_user, ["discover", "execute"]), "tool_id": slow_tool.tool_id},
                "burst": {"token": token(burst_user, ["discover", "api"]), "query": agents[0]["queries"][0]},
            }
        )
    )
    print(f"{len(tools)} mock tools, {len(agents)} agents with {per_user} tools each")


if __name__ == "__main__":
    main()
