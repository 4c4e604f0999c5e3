"""schema_for_model over every evaluation catalog's inputSchema: CPU per schema of a base revision's function and of
this tree's, in interleaved rounds, and how many schemas a model is shown otherwise (redteam52).

    git show main:mcpgateway/services/discovery.py > /tmp/base_discovery.py
    DEBUG=1 SECRET_KEY=x DJANGO_SETTINGS_MODULE=scoutsite.settings PYTHONPATH=. \\
        .venv/bin/python bench/schema_texts_shown.py /tmp/base_discovery.py
"""

import glob
import importlib.util
import json
import resource
import sys

import django

django.setup()

from mcpgateway.services import discovery as branch  # noqa: E402

ROUNDS = 5


def _base(path: str):
    spec = importlib.util.spec_from_file_location("mcpgateway.services._base_discovery", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    base = _base(sys.argv[1])
    schemas = []
    for path in sorted(glob.glob("/work/shared/eval/catalog-*.jsonl")):
        for line in open(path):
            row = json.loads(line)
            if isinstance(row.get("inputSchema"), dict):
                schemas.append((row["inputSchema"], row.get("name") or "tool"))
    totals = {"base": 0.0, "branch": 0.0}
    for _ in range(ROUNDS):
        for label, module in (("base", base), ("branch", branch)):
            start = _cpu()
            for schema, name in schemas:
                module.schema_for_model(schema, name=name)
            totals[label] += _cpu() - start
    print(f"{len(schemas)} schemas")
    for label, total in totals.items():
        print(f"{label}: {total / ROUNDS / len(schemas) * 1e6:.2f} us CPU per schema")
    print(f"branch/base: {totals['branch'] / totals['base']:.2f}")
    shown_otherwise = sum(base.schema_for_model(s, name=n) != branch.schema_for_model(s, name=n) for s, n in schemas)
    print(f"schemas shown otherwise: {shown_otherwise}")


if __name__ == "__main__":
    main()
