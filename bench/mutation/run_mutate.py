"""Mutation testing of the policy code with mutmut (``make mutate``): a habit, not a test, never in CI.

mutmut (pinned in requirements-mutate.txt, configured under ``[tool.mutmut]`` in pyproject.toml) copies the
project into ``mutants/``, writes every mutant of ``governance/services``, ``governance/selectors.py``,
``mcpgateway/services`` and ``search/engine`` into it, runs the selected tests once to learn which tests reach
each function, and then runs only those tests against each mutant.

The four packages hold about 5,300 mutants: far more than 2 cores check in an hour. So each package is
checked on a deterministic sample (the mutants whose SHA-256 of their name sorts first; the same names on
every run until the code changes), one package after another, and the script prints killed / survived /
equivalent / no-tests per package. ``--sample 0`` checks every mutant.

Survivors that the triage in docs/mutation-report.md found equivalent are listed in equivalent.txt beside
this file (``mutant-name  # why``) and counted apart.

    make mutate                          # every package, the default sample
    make mutate MUTATE_ARGS="--package search.engine --sample 0"
    .venv/bin/mutmut show NAME           # the diff of one mutant
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = ROOT / "mutants"
EQUIVALENT = Path(__file__).with_name("equivalent.txt")
# Package (mutant-name prefix) -> the files it covers, relative to the checkout.
PACKAGES = {
    "governance.services": "governance/services",
    "governance.selectors": "governance/selectors.py",
    "mcpgateway.services": "mcpgateway/services",
    "search.engine": "search/engine",
}
# mutmut's exit codes (mutmut/stats.py): 1 and 3 kill the mutant, 0 lets it survive, 33 and 5 mean that no
# selected test reaches its function, and the rest time out or crash.
STATUS = {1: "killed", 3: "killed", 0: "survived", 33: "no tests", 5: "no tests", None: "not checked"}


def mutmut(*args: str) -> None:
    # mutmut's console script, run by this interpreter (mutmut forks its workers from it).
    cli = "import sys; from mutmut.__main__ import cli; sys.argv[0] = 'mutmut'; cli()"
    subprocess.run([sys.executable, "-c", cli, *args], cwd=ROOT, check=True)


def generate() -> None:
    """Write the mutants into mutants/ (mutmut's own first step; a run names no mutant before it)."""
    sys.path.insert(0, str(ROOT))
    from mutmut.__main__ import create_mutants
    from mutmut.utils.file_utils import change_cwd, copy_also_copy_files, copy_src_dir

    with change_cwd(ROOT):
        MUTANTS.mkdir(exist_ok=True)
        copy_src_dir()
        copy_also_copy_files()
        create_mutants(2)


def meta_files(package: str) -> list[Path]:
    target = MUTANTS / PACKAGES[package]
    if target.suffix == ".py":
        return [target.with_name(target.name + ".meta")]
    return sorted(target.rglob("*.py.meta"))


def exit_codes(package: str) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in meta_files(package):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def sample(names: list[str], size: int) -> list[str]:
    if size <= 0 or size >= len(names):
        return sorted(names)
    return sorted(sorted(names, key=lambda name: hashlib.sha256(name.encode()).hexdigest())[:size])


def equivalent() -> dict[str, str]:
    if not EQUIVALENT.exists():
        return {}
    found = {}
    for line in EQUIVALENT.read_text().splitlines():
        name, _, why = line.partition("#")
        if name.strip():
            found[name.strip()] = why.strip()
    return found


def report(package: str, names: list[str]) -> Counter[str]:
    codes = exit_codes(package)
    known_equivalent = equivalent()
    counts: Counter[str] = Counter()
    for name in names:
        status = STATUS.get(codes.get(name), "timeout or crash")
        if status == "survived" and name in known_equivalent:
            status = "equivalent"
        counts[status] += 1
        if status in ("survived", "no tests", "timeout or crash"):
            print(f"    {status:>16}  {name}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", action="append", choices=sorted(PACKAGES), help="default: all four")
    parser.add_argument("--sample", type=int, default=60, help="mutants per package (0: all); default 60")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--report-only", action="store_true", help="print the last results without running")
    options = parser.parse_args()
    packages = options.package or list(PACKAGES)

    if not options.report_only:
        generate()
    table = []
    for package in packages:
        names = sample(list(exit_codes(package)), options.sample)
        if not options.report_only:
            print(f"== {package}: {len(names)} mutants", flush=True)
            mutmut("run", "--max-children", str(options.max_children), *names)
        print(f"== {package}: results")
        table.append((package, len(names), report(package, names)))

    print(f"\n{'package':<24}{'checked':>8}{'killed':>8}{'survived':>10}{'equivalent':>12}{'no tests':>10}{'other':>7}")
    for package, size, counts in table:
        other = size - sum(counts[k] for k in ("killed", "survived", "equivalent", "no tests"))
        print(
            f"{package:<24}{size:>8}{counts['killed']:>8}{counts['survived']:>10}"
            f"{counts['equivalent']:>12}{counts['no tests']:>10}{other:>7}"
        )


if __name__ == "__main__":
    main()
