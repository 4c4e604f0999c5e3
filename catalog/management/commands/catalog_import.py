"""``manage.py catalog_import FILE.jsonl [FILE ...]``: load tools/list dumps as imported servers."""

from contextlib import ExitStack
from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from catalog.progress import ProgressCallback, ProgressCommand
from catalog.services.imports import ImportFileError, ImportReport, catalog_import_files

MAX_BAD_LINES_SHOWN = 50


class Command(ProgressCommand):
    help = (
        "Import JSON Lines tool dumps (one tool per line: server, name, description, inputSchema) as servers "
        "with no live connection. Each file is the complete listing of the servers it names; re-importing "
        "the same file changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE.jsonl")
        parser.add_argument("--environment", help="Environment of the imported servers (e.g. production)")
        parser.add_argument(
            "--servers", type=Path, metavar="SERVERS.jsonl", help="Server metadata: title, description, categories"
        )
        parser.add_argument(
            "--no-index",
            action="store_false",
            dest="index",
            help="Skip the search index update per batch (huge files); run `manage.py search_rebuild` afterwards",
        )

    def handle(
        self, *args, files: list[Path], environment: str | None, servers: Path | None, index: bool, **options
    ) -> None:
        self.verbosity = int(options.get("verbosity", 1))
        with ExitStack() as bars:

            def progress_for(path: Path) -> ProgressCallback:
                bars.close()  # one file at a time: finish the previous file's bar first
                return bars.enter_context(self.progress(f"import {path.name}", unit="tools"))

            try:
                reports = catalog_import_files(
                    paths=files, environment=environment, servers_path=servers, index=index, progress_for=progress_for
                )
            except ImportFileError as exc:
                raise CommandError(str(exc)) from exc
        for report in reports:
            self._print_report(report)
        if self.verbosity and not index and any(report.touched_pks for report in reports):
            self.stdout.write("search index not updated (--no-index): run `manage.py search_rebuild` now")

    def _print_report(self, report: ImportReport) -> None:
        for error in report.bad_lines[:MAX_BAD_LINES_SHOWN]:
            self.stderr.write(f"{report.source}: {error}")
        if len(report.bad_lines) > MAX_BAD_LINES_SHOWN:
            more = len(report.bad_lines) - MAX_BAD_LINES_SHOWN
            self.stderr.write(f"{report.source}: ... and {more} more (see the import runs in the admin)")
        summary = (
            f"{report.source}: {report.servers} servers; tools added {report.added}, changed {report.changed}, "
            f"unchanged {report.unchanged}, removed {report.removed}, rejected {report.rejected}; "
            f"{report.seconds:.2f}s"
        )
        if report.failed_servers:
            self.stderr.write(self.style.ERROR(f"{summary}; {report.failed_servers} servers failed"))
        elif not self.verbosity:
            return  # --verbosity 0: errors only
        elif report.rejected:
            self.stdout.write(self.style.WARNING(summary))
        else:
            self.stdout.write(self.style.SUCCESS(summary))
