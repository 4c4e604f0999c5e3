"""Sync servers' tools now, in this process, and print what each run changed."""

from django.core.management.base import CommandError, CommandParser

from catalog.advice import sync_failed_next, then_sync_again
from catalog.choices import SyncStatus
from catalog.models import Server, SyncRun
from catalog.progress import ProgressCommand
from catalog.services.sync import server_list_syncable, server_sync


class Command(ProgressCommand):
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
        # Slugs read now: a server deleted before or while it syncs has none to read afterwards.
        slug_of = dict(Server.objects.filter(pk__in=pks).values_list("pk", "slug"))

        failed = 0
        runs: list[SyncRun | str] = []
        with self.progress("syncing", unit="servers") as progress:
            progress(0, len(pks))
            for done, pk in enumerate(pks, start=1):
                try:
                    run = server_sync(server_pk=pk, trigger="command")
                except Server.DoesNotExist:
                    # Deleted meanwhile: nothing left to sync or report on; the others still sync.
                    runs.append(slug_of.get(pk, f"server {pk}"))
                else:
                    failed += run.status == SyncStatus.FAILED
                    runs.append(run)
                progress(done, len(pks))
        # Failed runs print even at --verbosity 0. After the bar, not under it: tqdm redraws its line, and
        # a line written meanwhile would be torn.
        for run in runs:
            if isinstance(run, str):
                if int(options["verbosity"]):
                    self.stdout.write(f"{run:<20} gone: deleted meanwhile")
            elif run.status == SyncStatus.FAILED or int(options["verbosity"]):
                self._print_run(run)
        if failed:
            raise CommandError(f"{failed} of {len(pks)} sync(s) failed")

    def _print_run(self, run: SyncRun) -> None:
        line = (
            f"{run.server.slug:<20} {run.status:<8} added={run.added} changed={run.changed} "
            f"unchanged={run.unchanged} removed={run.removed} rejected={run.rejected} "
            f"in {run.duration_seconds or 0:.2f}s"
        )
        self.stdout.write(line)
        if run.error:
            self.stdout.write(f"    {run.error}")
        if run.status == SyncStatus.FAILED:
            self.stdout.write(f"    What to do: {sync_failed_next(run.error, then=then_sync_again(run.server.slug))}")
