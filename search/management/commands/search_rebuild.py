from typing import Any

from django.core.management.base import BaseCommand

from search.services import index_rebuild


class Command(BaseCommand):
    help = "Rebuild the search index from the catalog (stored vectors of unchanged tools are reused)."

    def handle(self, *args: Any, **options: Any) -> None:
        generation = index_rebuild()
        self.stdout.write(
            f"generation {generation.pk} ({generation.token}): {generation.tool_count} tools, "
            f"{generation.encoded} encoded, {generation.reused} reused, degraded={generation.degraded}"
        )
