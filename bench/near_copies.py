"""Near-copies in the public catalogs (governance.services.review.near_copy): per catalog, the tools held as copies
of an earlier tool of another server, by the same name or another one, with the candidates LongCopyFinder gave per
tool and the CPU of the check. Each catalog's servers are read as live, shared and on their own upstreams.

    DEBUG=1 .venv/bin/python bench/near_copies.py ../shared/eval
"""

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()

from governance.services.review import LongCopyFinder, near_copy  # noqa: E402


def main() -> None:
    for path in sorted(Path(sys.argv[1]).glob("catalog-*.jsonl")):
        tools = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        by_name: dict[str, list[int]] = defaultdict(list)
        for number, tool in enumerate(tools):
            by_name[tool["name"].lower()].append(number)
        started = time.process_time()
        finder = LongCopyFinder({number: tool.get("description") or "" for number, tool in enumerate(tools)})
        same, other, candidates = 0, [], 0
        for number, later in enumerate(tools):
            found = finder.candidates(later.get("description") or "")
            candidates += len(found)
            for earlier in sorted({*by_name[later["name"].lower()], *found}):
                was = tools[earlier]
                if earlier >= number or was.get("server") == later.get("server"):
                    continue
                if near_copy(later["name"], later.get("description") or "", was["name"], was.get("description") or ""):
                    if was["name"].lower() == later["name"].lower():
                        same += 1
                    else:
                        other.append(f"{later['id']} ~ {was['id']}")
                    break
        seconds = time.process_time() - started
        print(
            f"{path.name}: {len(tools)} tools, same name {same}, another name {len(other)}, "
            f"candidates per tool {candidates / max(len(tools), 1):.1f}, {seconds:.2f} s CPU"
        )
        for pair in other:
            print("   ", pair)


if __name__ == "__main__":
    main()
