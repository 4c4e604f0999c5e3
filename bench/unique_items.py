"""CPU time of checking a caller's array against ``uniqueItems``: jsonschema's own check against Scout's
(``catalog.schemas.arguments_validator``). Run: ``.venv/bin/python bench/unique_items.py`` (see NOTES-redteam39.md)."""

import time

import jsonschema

from catalog.schemas import arguments_validator

SCHEMA = {"type": "object", "properties": {"labels": {"type": "array", "uniqueItems": True}}}

for n in (5_000, 10_000, 40_000):
    arguments = {"labels": ["first", *range(n)]}  # a string among numbers: jsonschema cannot sort them
    checks = [("scout", arguments_validator(SCHEMA))]
    if n <= 10_000:  # 40,000 takes jsonschema minutes
        checks.insert(0, ("jsonschema", jsonschema.Draft202012Validator(SCHEMA)))
    for name, validator in checks:
        started = time.process_time()
        list(validator.iter_errors(arguments))
        print(f"{n:>6} items  {name:<10}  {time.process_time() - started:.3f} s CPU")
