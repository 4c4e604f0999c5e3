"""Give every tool of a bench database random unit vectors and publish a full generation (a stand-in for
encoding the catalog with the real model; bench/bench_search.py uses random tool vectors the same way: scan
and snapshot costs do not depend on the values). Tools a later sync adds are encoded by the real model as usual.

Real vectors cost minutes, not hours: ``bench_mcp_http.py --prepare-only --tools 10000`` encodes 21,304 texts
in about 12 to 17 minutes on the shared 2-core machine (706 s at a load average near 7), so prefer them. Random
vectors change the rankings and their confidence (a withheld answer is retried with the request's parts encoded
alone, one more model call: ``search.services.tool_search``), so a c=1 ratio measured on them may differ.

    DB=var/bench-mcp-10000.sqlite3 .venv/bin/python bench/random_vectors_db.py
    .venv/bin/python bench/bench_mcp_http.py --tools 10000 --db var/bench-mcp-10000.sqlite3 ...

Run it after ``bench_mcp_http.py --prepare-only`` has imported the catalog (stop it once it reports
"encoding: started"). It replaces every stored vector and index generation of that database.
"""

import os
import sys
from pathlib import Path

# SCOUT_BENCH_ROOT: another checkout whose code writes the vectors (as bench_mcp_http.py measures it).
ROOT = Path(os.environ.get("SCOUT_BENCH_ROOT") or Path(__file__).resolve().parent.parent).resolve()


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")  # a throwaway key for this process
    os.environ["SQLITE_PATH"] = str(Path(os.environ["DB"]).resolve())  # before the working directory changes
    sys.path.insert(0, str(ROOT))
    # Celery's Django fixup puts the working directory first on sys.path at setup: from ROOT, ROOT's code is
    # imported, not the code of the directory this was run from.
    os.chdir(ROOT)
    import django

    django.setup()
    import numpy as np
    from django.core.management import call_command
    from django.utils import timezone

    from search.choices import GenerationKind, GenerationStatus
    from search.encoder import encoder_get, model_key
    from search.models import IndexGeneration, ToolEmbedding
    from search.selectors import tool_docs_load

    call_command("migrate", verbosity=0)
    key, dim = model_key(), encoder_get().dim
    docs = tool_docs_load()
    rng = np.random.default_rng(11)
    rows = []
    for doc in docs:
        pairs = doc.dense_texts()
        block = rng.standard_normal((len(pairs) + len(doc.negatives), dim)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        rows_, kinds, texts = doc.vector_rows(block[: len(pairs)])
        block = np.vstack([rows_, block[len(pairs) :]])
        rows.append(
            ToolEmbedding(
                tool_id=doc.pk,
                model_key=key,
                dense_hash=doc.dense_hash(),
                dim=dim,
                kinds=list(kinds),
                texts=list(texts),
                negative_count=len(doc.negatives),
                vectors=block.tobytes(),
            )
        )
    ToolEmbedding.objects.all().delete()
    IndexGeneration.objects.all().delete()
    ToolEmbedding.objects.bulk_create(rows, batch_size=500)
    IndexGeneration.objects.create(
        kind=GenerationKind.FULL,
        status=GenerationStatus.READY,
        model_key=key,
        tool_count=len(docs),
        reused=len(docs),
        finished_at=timezone.now(),
    )
    print(f"{len(docs)} tools, {sum(len(r.kinds) for r in rows)} random vectors under {key}")


if __name__ == "__main__":
    main()
