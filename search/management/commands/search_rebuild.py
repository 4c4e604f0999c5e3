from typing import Any

from catalog.progress import ProgressCommand
from search.services import index_rebuild


class Command(ProgressCommand):
    help = "Rebuild the search index from the catalog (stored vectors of unchanged tools are reused)."

    def handle(self, *args: Any, **options: Any) -> None:
        with self.progress("encoding", unit="texts") as progress:
            generation = index_rebuild(progress=progress)
        if int(options["verbosity"]):
            self.stdout.write(
                f"generation {generation.pk} ({generation.token}): {generation.tool_count} tools, "
                f"{generation.encoded} encoded, {generation.reused} reused, degraded={generation.degraded}"
            )
