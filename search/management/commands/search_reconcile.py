from typing import Any

from django.core.management.base import BaseCommand, CommandError

from search.backends.weaviate import WeaviateUnavailable
from search.services import index_reconcile


class Command(BaseCommand):
    help = (
        "Compare the search backend's server-side index (Weaviate) with the database and repair drift: "
        "missing, stale and left-over objects; a rebuild when there is no collection or another model's."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = index_reconcile()
        except WeaviateUnavailable as exc:
            raise CommandError(str(exc)) from exc
        if not done:
            self.stdout.write("nothing to reconcile: the configured backend keeps no server-side index")
            return
        self.stdout.write(", ".join(f"{key} {value}" for key, value in done.items()))
