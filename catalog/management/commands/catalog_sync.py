"""Sync servers' tools now, in this process, and print what each run changed."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.choices import SyncStatus
from catalog.models import Server
from catalog.services.sync import server_list_syncable, server_sync


class Command(BaseCommand):
    help = "Sync the named servers (by slug), or every live non-disabled server with --all, and print each run."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*", metavar="SLUG", help="servers to sync")
        parser.add_argument("--all", action="store_true", help="sync every live, non-disabled server")

    def handle(self, *args: object, slugs: list[str], all: bool, **options: object) -> None:
        if all and slugs:
            raise CommandError("give server slugs or --all, not both")
        if all:
            pks = server_list_syncable()
            if not pks:
                self.stdout.write("no live servers to sync")
                return
        elif slugs:
            found = dict(Server.objects.filter(slug__in=slugs).values_list("slug", "pk"))
            unknown = [slug for slug in slugs if slug not in found]
            if unknown:
                raise CommandError(f"unknown server(s): {', '.join(unknown)}")
            pks = [found[slug] for slug in dict.fromkeys(slugs)]
        else:
            raise CommandError("name at least one server slug, or pass --all")

        failed = 0
        for pk in pks:
            run = server_sync(server_pk=pk, trigger="command")
            failed += run.status == SyncStatus.FAILED
            self.stdout.write(
                f"{run.server.slug:<20} {run.status:<8} added={run.added} changed={run.changed} "
                f"unchanged={run.unchanged} removed={run.removed} rejected={run.rejected} "
                f"in {run.duration_seconds or 0:.2f}s"
            )
            if run.error:
                self.stdout.write(f"    {run.error}")
        if failed:
            raise CommandError(f"{failed} of {len(pks)} sync(s) failed")
