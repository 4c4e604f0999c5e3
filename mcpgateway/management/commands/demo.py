"""``manage.py demo``: the local demo on the embedded default, with real MCP servers.

Migrates, creates (or resets) an admin login and prints it, registers real upstream MCP servers installed
by ``make install`` (``mcp-server-time`` and ``mcp-server-git`` from PyPI; ``server-memory`` and
``server-everything`` from npm), syncs them, builds the search index, issues an API token for MCP clients
and serves Scout on 127.0.0.1:8000 by becoming the server `make run` starts (same command, same settings).
"""

import ipaddress
import os
import secrets
import shutil
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from catalog.choices import ServerStatus, Transport
from catalog.models import Server
from catalog.progress import ProgressCommand

DEMO_USERNAME = "admin"
APPROVER_USERNAME = "approver"
# One login per preset role (governance.roles), so a newcomer can see each role's admin home.
CURATOR_USERNAME = "curator"
OPERATOR_USERNAME = "operator"
DEMO_GROUP = "Demo users"
# (tool, curated purpose, example requests): what a curator would write for the demo's servers.
# server-memory keeps a knowledge graph (people, organisations, projects, their facts and relations): no notes, no
# files. A curated word it has no tool for ("recall earlier notes") made "read the meeting notes file" a high answer.
DEMO_CURATION = [
    (
        "memory::create_entities",
        "Remember new people, organisations or projects, with facts about them, for later conversations.",
        [
            "remember that a person works at a company",
            "remember a new project and who owns it",
            # "remember that Bob likes coffee" matched the first only by "remember" (cosine .31): low confidence.
            "remember what someone likes, such as their favourite food or drink",
            "remember where someone lives or when their birthday is",
            # agentux18: "remember that Carol prefers tea" was low: "prefers" is not "likes" to the model.
            "remember someone's preferences",
        ],
    ),
    (
        "memory::add_observations",
        "Add facts to a person, organisation or project already remembered.",
        ["remember one more detail about someone we already know"],
    ),
    (
        "memory::search_nodes",
        "Look up what was remembered about a person, organisation or project, by name, kind or fact.",
        # "what does Carol prefer" was withheld (no tool fits): a question about someone's likes read nothing here.
        [
            "what do you remember about this person",
            "what do we know about that company",
            "what does this person like or prefer",
            # agentux18: "who works at Acme" led with create_entities, high, on "works at a company" (a request to
            # remember): a question about who belongs where is a lookup.
            "who works at a company",
        ],
    ),
    # agentux18: "show me everything stored about Alice and Bob" was low, git_show second (it "shows" things):
    # upstream's "Open specific nodes ... by their names" says nothing a user says.
    (
        "memory::open_nodes",
        "Show all that was remembered about people, organisations or projects named: their facts and relations.",
        ["show all you know about these people by name"],
    ),
    # "link Alice to Acme as an employee" was low, with everything's gzip-file-as-resource first (its text says
    # "link"): upstream says "relations between entities", no word a user says.
    (
        "memory::create_relations",
        "Link people, organisations or projects to each other: who works where, who owns or belongs to what.",
        ["link a person to the company they work for"],
    ),
    (
        "git::git_log",
        "Show the history of recent commits.",
        ["show me the latest commits", "who changed the repository recently"],
    ),
    # Upstream: "Shows the working tree status", no word of a request for it ("files changed but not
    # committed" found git_branch, git_add, git_log ...; git_status came 10th): a purpose in users' words.
    # "what changed in the last commit" put git_commit (a write, for the noun "commit") first and git_show, the
    # tool that shows it, below the first five: upstream's "Shows the contents of a commit" says no "changed".
    (
        "git::git_show",
        "Show what a commit changed (its message and diff; HEAD is the last commit), or a file as it was at a "
        "revision (<revision>:<path>).",
        ["what did the latest commit change"],
    ),
    (
        "git::git_status",
        "Show which files in the working tree are modified, staged or untracked: what is not committed yet.",
        # agentux26: "what files did I change but not commit yet" led with git_show, high, on its example "what did
        # the latest commit change": git status answers what I changed, and had no example in users' words.
        ["what have I changed since the last commit"],
    ),
    # agentux17: upstream's "Adds file contents to the staging area", "Switches branches" and "Delete multiple
    # entities ..." share no word with "stage README.md", "switch to the feature-x branch" or "forget everything about
    # Carol" (words are matched as written: "stage" is not "staging"): git_commit, git_create_branch (writes) came
    # first and delete_entities was not among the five.
    # agentux18: "stage all my changes" led with git_reset, whose upstream text is "Unstages all staged changes".
    (
        "git::git_add",
        "Stage files: add them to the staging area, so that the next commit includes them.",
        ["stage every modified file"],
    ),
    (
        "git::git_reset",
        # agentux26: "(the files keep their changes)" made "keep in mind that Dana drinks green tea" lead with
        # git_reset on "keep", a word users say for remembering.
        "Unstage: take every staged change out of the staging area again (the changes stay in the files).",
        [],
    ),
    (
        "git::git_checkout",
        "Switch to another existing branch (check it out).",
        [],
    ),
    (
        "memory::delete_entities",
        "Forget people, organisations or projects entirely: delete them and their relations.",
        # agentux18: "forget everything about Carol" was low, with search_nodes first.
        ["forget all about a person"],
    ),
    (
        "memory::delete_observations",
        "Remove single facts about a person, organisation or project that are no longer true.",
        [],
    ),
    # agentux26: upstream's "Get current time in a specific timezones" and "Convert time between timezones" say
    # neither "now" nor a city: "what time is it in Tokyo" was a near tie between them (convert_time first). The
    # current time comes with its day of the week (its outputSchema's day_of_week). Its purpose alone left convert_time
    # first: convert_time's sample target zone 'Asia/Tokyo' is a word of its (bench/NOTES-agentux26.md).
    (
        "time::get_current_time",
        "Tell what time and day of the week it is now in a city or time zone.",
        ["what time is it now in some city"],
    ),
    (
        "time::convert_time",
        "Convert a given clock time from one time zone to another.",
        [],
    ),
    # "what is 17 plus 25" was low with get-sum 4th, and "add two numbers" served memory::add_observations and
    # git::git_add, with their schemas, beside it on the word "add" alone.
    (
        "everything::get-sum",
        "Add two numbers: a plus b, their sum.",
        ["what is 2 plus 3"],
    ),
]
# (tool, negative queries): requests a tool's examples come close to and that it does not serve.
DEMO_NEGATIVES = [
    # agentux18: "who works at Acme" led with create_entities ("remember that a person works at a company"): asking
    # who works somewhere looks up, it remembers nothing.
    ("memory::create_entities", ["who works at a company"]),
]
# Example requests earlier versions of the demo curated and no longer do: removed from a database they curated.
DEMO_RETIRED_EXAMPLES = [
    ("memory::create_entities", "keep a note about a new project and who owns it"),
    ("memory::search_nodes", "recall earlier notes on a project"),
]


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _port_taken(host: str, port: int) -> bool:
    """Whether something already listens where the demo would serve (uvicorn's bind, SO_REUSEADDR as it does)."""
    address = host.strip("[]")
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError:
            return True
    return False


def _base_url(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    return f"http://{host}:{port}"


class Command(ProgressCommand):
    help = "Set up and serve the local demo: admin login, real MCP servers synced, search index, API token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-serve", action="store_true", help="Set up only; do not start the server.")
        parser.add_argument("--data-dir", type=Path, help="Where the demo repository and memory file live (var/).")
        parser.add_argument(
            "--import", dest="imports", action="append", default=[], help="Also import a tools/list dump (JSONL)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.DEBUG and not options["no_serve"] and not _is_loopback(options["host"]):
            # Debug pages show settings, code and SQL to whoever can reach the server.
            raise CommandError(
                f"DEBUG is on: Django's debug pages would be served to anyone who reaches {options['host']}. "
                "Serve the demo on 127.0.0.1, or run it without DEBUG."
            )
        if not options["no_serve"] and _port_taken(options["host"], options["port"]):
            # Found after the set-up, it printed new passwords (the running demo's too) and then failed to serve.
            raise CommandError(
                f"{_base_url(options['host'], options['port'])} is in use (a demo already running?): stop it, or "
                f"serve on another port (make demo PORT={options['port'] + 1}). Nothing was changed."
            )
        try:
            self._set_up(options)
        except KeyboardInterrupt:  # Ctrl-C before the server started: a line, not a traceback
            raise CommandError(
                "interrupted before the demo was ready; nothing is served. `make demo` sets it up again.",
                returncode=130,
            ) from None
        if not options["no_serve"]:
            self._serve(options["host"], options["port"])

    def _set_up(self, options: dict[str, Any]) -> None:
        if not os.environ.get("SCOUT_PUBLIC_URL"):
            # The links Scout gives (landing page, approval URLs told to agents and mailed to approvers, the MCP
            # URL on a new token's page) name the address this demo serves on, not the default port 8000.
            # Set in the environment too: the server this command becomes (_serve) loads its settings afresh.
            os.environ["SCOUT_PUBLIC_URL"] = settings.SCOUT_PUBLIC_URL = _base_url(options["host"], options["port"])
        var = options["data_dir"] or Path(settings.BASE_DIR) / "var"
        var.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        from governance.roles import APPROVERS, CURATORS, OPERATORS

        password = self._login(DEMO_USERNAME, superuser=True)
        approver_password = self._login(APPROVER_USERNAME, superuser=False, role=APPROVERS)
        role_passwords = {
            CURATOR_USERNAME: self._login(CURATOR_USERNAME, superuser=False, role=CURATORS),
            OPERATOR_USERNAME: self._login(OPERATOR_USERNAME, superuser=False, role=OPERATORS),
        }
        servers = self._register_servers(var)
        self._sync(servers)
        self._grant(servers)
        self._curate()
        for path in options["imports"]:
            call_command("catalog_import", path, **self._progress_options())
        self._build_index()
        token = self._api_token()
        self._print_summary(options["host"], options["port"], password, approver_password, role_passwords, token)

    def _serve(self, host: str, port: int) -> None:
        """Become the server `make run` starts: ``uvicorn scoutsite.asgi:application --http <PROTOCOL>`` in a
        fresh interpreter (this process is replaced). Its settings load the way a serving process's do:
        scoutsite/asgi.py marks it serving (SCOUT_DB_SERVING) first, so its Postgres connections get the lock
        and statement timeouts (F7). This process loaded its settings as a management command, without them."""
        from django.db import connections

        from scoutsite.serving import PROTOCOL

        command = [sys.executable, "-m", "uvicorn", "scoutsite.asgi:application", "--http", PROTOCOL]
        command += ["--host", host, "--port", str(port), "--app-dir", str(settings.BASE_DIR)]
        connections.close_all()
        self.stdout.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, command)

    def _login(self, username: str, *, superuser: bool, role: str | None = None) -> str:
        """Create the login (in the preset group ``role``), or reset its password: the new one is printed, never
        stored in clear."""
        from django.contrib.auth.models import Group

        user, _ = get_user_model().objects.get_or_create(username=username, defaults={"email": f"{username}@localhost"})
        password = secrets.token_urlsafe(12)
        user.is_staff = user.is_active = True
        user.is_superuser = superuser
        user.set_password(password)
        user.save()
        if role is not None:
            user.groups.add(Group.objects.get(name=role))
        return password

    def _grant(self, servers: list[Server]) -> None:
        """Agents see only what is granted, superusers included: both demo logins may use the demo servers;
        the approver (not the admin, who makes the calls) may approve them. Only what is not granted yet: granted
        again on each start, every grant was audited again ("approver already had approve on git", 12 rows a start)."""
        from django.contrib.auth.models import Group

        from governance.services.permissions import permission_grant, permission_held

        admin = get_user_model().objects.get(username=DEMO_USERNAME)
        approver = get_user_model().objects.get(username=APPROVER_USERNAME)
        group, _ = Group.objects.get_or_create(name=DEMO_GROUP)
        admin.groups.add(group)
        approver.groups.add(group)
        for server in servers:
            for action, holder in (("discover", group), ("execute", group), ("approve", approver)):
                if not permission_held(target=server, action=action, holder=holder):
                    permission_grant(actor=admin, target=server, action=action, holder=holder)

    def _register_servers(self, var: Path) -> list[Server]:
        bin_dir = Path(sys.executable).parent
        node_bin = Path(settings.BASE_DIR) / "tools" / "node_modules" / ".bin"
        repo = self._demo_repository(var / "demo-repo")
        # server-memory keeps its knowledge graph in this file; the variable is passed by name, never stored.
        os.environ.setdefault("MEMORY_FILE_PATH", str(var / "demo-memory.jsonl"))
        specs = [
            ("time", "Time", "Current time and time-zone conversion.", str(bin_dir / "mcp-server-time"), [], []),
            (
                "git",
                "Git",
                f"Git operations on the demo repository {repo}.",
                str(bin_dir / "mcp-server-git"),
                ["--repository", str(repo)],
                [],
            ),
        ]
        if (node_bin / "mcp-server-memory").exists():
            specs.append(
                (
                    "memory",
                    "Memory",
                    "A knowledge graph of entities and relations that persists across conversations.",
                    str(node_bin / "mcp-server-memory"),
                    [],
                    ["MEMORY_FILE_PATH"],
                )
            )
        if (node_bin / "mcp-server-everything").exists():
            specs.append(
                (
                    "everything",
                    "Everything",
                    "The MCP reference test server: echo, sums, long operations, sample data.",
                    str(node_bin / "mcp-server-everything"),
                    ["stdio"],
                    [],
                )
            )
        servers = []
        for slug, name, description, command, arguments, env_vars in specs:
            server, _ = Server.objects.update_or_create(
                slug=slug,
                defaults={
                    "name": name,
                    "description": description,
                    "environment": "development",
                    "transport": Transport.STDIO,
                    "command": command,
                    "args": arguments,
                    "env_vars": env_vars,
                    "status": ServerStatus.ACTIVE,
                },
            )
            servers.append(server)
        return servers

    def _curate(self) -> None:
        """A little curation, as a curator would add in the admin: example requests in users' words lift a
        tool whose upstream text uses other words (try them in the admin's search preview)."""
        from catalog.models import Tool, ToolExample, ToolNegativeExample
        from catalog.services.curation import tool_curation_update

        # The tools whose phrases this start changed: only those are curated again (and reindexed). Said changed on
        # every start, each curated tool got a new curation time and an index update of its own (15 a start).
        changed = set()
        for tool_id, text in DEMO_RETIRED_EXAMPLES:
            if ToolExample.objects.filter(tool__tool_id=tool_id, text=text).delete()[0]:
                changed.add(tool_id)
        for tool_id, texts in DEMO_NEGATIVES:
            for tool in Tool.objects.filter(tool_id=tool_id):
                for text in texts:
                    if not ToolNegativeExample.objects.filter(tool=tool, text=text).exists():
                        ToolNegativeExample.objects.create(tool=tool, text=text)
                        changed.add(tool_id)
        purposes = {tool_id: purpose for tool_id, purpose, _ in DEMO_CURATION}
        for tool_id, _, examples in DEMO_CURATION:
            for tool in Tool.objects.filter(tool_id=tool_id):
                for text in examples:  # not get_or_create: a curator may have listed one twice in an older version
                    if not ToolExample.objects.filter(tool=tool, text=text).exists():
                        ToolExample.objects.create(tool=tool, text=text)
                        changed.add(tool_id)
        for tool in Tool.objects.filter(tool_id__in={*purposes, *changed}):
            tool_curation_update(tool=tool, purpose=purposes.get(tool.tool_id), phrases_changed=tool.tool_id in changed)

    def _demo_repository(self, path: Path) -> Path:
        if not (path / ".git").exists():
            path.mkdir(parents=True, exist_ok=True)
            git = shutil.which("git") or "git"
            env = {**os.environ, "GIT_AUTHOR_NAME": "Scout demo", "GIT_AUTHOR_EMAIL": "demo@localhost"}
            env |= {"GIT_COMMITTER_NAME": "Scout demo", "GIT_COMMITTER_EMAIL": "demo@localhost"}
            (path / "README.md").write_text("# Demo repository\n\nA repository for Scout's git MCP server demo.\n")
            subprocess.run([git, "init", "-q", "-b", "main"], cwd=path, check=True, env=env)
            subprocess.run([git, "add", "README.md"], cwd=path, check=True, env=env)
            subprocess.run([git, "commit", "-q", "-m", "Initial commit"], cwd=path, check=True, env=env)
        return path

    def _progress_options(self) -> dict[str, Any]:
        """The steps run as commands show their progress as this command was told to."""
        return {
            "no_progress": self.progress_disabled,
            "verbosity": 0 if self.progress_quiet else 1,
            "stdout": self.stdout._out,
            "stderr": self.stderr._out,
        }

    def _sync(self, servers: list[Server]) -> None:
        from catalog.services.sync import server_sync

        runs = []
        with self.progress("syncing demo servers", unit="servers") as progress:
            progress(0, len(servers))
            for done, server in enumerate(servers, start=1):
                runs.append(server_sync(server_pk=server.pk, trigger="demo"))
                progress(done, len(servers))
        for run in runs:
            self.stdout.write(
                f"synced {run.server.slug:<12} {run.status:<8} +{run.added} ~{run.changed} ={run.unchanged} "
                f"-{run.removed} in {run.duration_seconds or 0:.1f}s {run.error[:200]}"
            )

    def _build_index(self) -> None:
        try:
            call_command("search_rebuild", **self._progress_options())
        except Exception as exc:  # the demo still serves: the gateway lists tools directly without an index
            self.stderr.write(f"search index not built ({exc}); tools are listed directly")

    def _api_token(self) -> str | None:
        try:
            from governance.models import Agent
            from governance.services.tokens import api_token_create
        except ImportError:
            return None
        user = get_user_model().objects.get(username=DEMO_USERNAME)
        # The demo's agent may use whatever its person may (no narrowing grants of its own).
        agent, _ = Agent.objects.get_or_create(user=user, name="demo-client", defaults={"all_user_tools": True})
        try:
            _, raw = api_token_create(
                user=user,
                name=f"demo {timezone.now():%Y-%m-%d %H:%M}",
                agent=agent,
                scopes=frozenset({"discover", "execute"}),
                expires_at=timezone.now() + timedelta(days=7),
            )
        except ValidationError as error:  # each start mints one: a demo started often holds the most allowed
            self.stderr.write(f"no new token: {' '.join(error.messages)}")
            return None
        return raw

    def _print_summary(
        self,
        host: str,
        port: int,
        password: str,
        approver_password: str,
        role_passwords: dict[str, str],
        token: str | None,
    ) -> None:
        base = _base_url(host, port)
        curator, operator = role_passwords[CURATOR_USERNAME], role_passwords[OPERATOR_USERNAME]
        lines = [
            "",
            "Scout demo is ready.",
            f"  Admin:    {base}/admin/   login: {DEMO_USERNAME} / {password}",
            f"  Approver: {base}/admin/   login: {APPROVER_USERNAME} / {approver_password}  (decides pending calls)",
            f"  Curator:  {base}/admin/   login: {CURATOR_USERNAME} / {curator}  (makes tools findable)",
            f"  Operator: {base}/admin/   login: {OPERATOR_USERNAME} / {operator}  (servers, access, tokens)",
            f"  MCP:      {base}/mcp",
        ]
        if token:
            lines += [
                f"  Token:    {token}   (shown once; revoke it in the admin under API tokens)",
                "  Try it:   PATH=tools/node_modules/.bin:$PATH mcp-inspector --cli "
                f'{base}/mcp --transport http --header "Authorization: Bearer {token}" --method tools/list',
            ]
        self.stdout.write("\n".join(lines) + "\n")
