"""Mutation testing of the policy code with mutmut (``make mutate``): a habit, not a test, never in CI.

mutmut (pinned in requirements-mutate.txt, configured under ``[tool.mutmut]`` in pyproject.toml) copies the
project into ``mutants/``, writes every mutant of ``governance/services``, ``governance/selectors``,
``mcpgateway/services`` and ``search/engine`` into it, runs the selected tests once to learn which tests reach
each function, and then runs only those tests against each mutant.

The four packages hold about 5,300 mutants: far more than 2 cores check in an hour. So each package is
checked on a deterministic sample (the mutants whose SHA-256 of their name sorts first; the same names on
every run until the code changes), and the script prints killed / survived / equivalent / no-tests per
package. ``--sample 0`` checks every mutant; ``--package`` (repeatable) checks one package at a time.

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
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

# SCOUT_BENCH_ROOT: another checkout to mutate (its code, its tests), as the bench scripts measure one.
ROOT = Path(os.environ.get("SCOUT_BENCH_ROOT") or Path(__file__).resolve().parents[2]).resolve()
MUTANTS = ROOT / "mutants"
EQUIVALENT = Path(__file__).with_name("equivalent.txt")
# Package (mutant-name prefix) -> the files it covers, relative to the checkout.
PACKAGES = {
    "governance.services": "governance/services",
    "governance.selectors": "governance/selectors",
    "mcpgateway.services": "mcpgateway/services",
    "search.engine": "search/engine",
}
# mutmut's exit codes (mutmut/stats.py): 1 and 3 kill the mutant, 0 lets it survive, 33 and 5 mean that no
# selected test reaches its function, and the rest time out or crash.
STATUS = {1: "killed", 3: "killed", 0: "survived", 33: "no tests", 5: "no tests", None: "not checked"}


# mutmut's console script, run by this interpreter (mutmut forks its workers from it). MUTATE_TESTS replaces
# the configured test selection; MUTATE_NO_CLEAN_RERUN skips mutmut's second clean pass over the selected
# tests, which only repeats the stats pass that has just run them green (mutmut 3.8.1 has no option for it;
# skipped unless --clean-rerun: it costs as long as the stats pass).
MUTMUT = """
import json, os, sys
from mutmut.configuration import config
from mutmut.workers.isolation import ForkRunner
from mutmut.__main__ import cli
if os.environ.get("MUTATE_TESTS"):
    config().pytest_add_cli_args_test_selection = json.loads(os.environ["MUTATE_TESTS"])
if os.environ.get("MUTATE_NO_CLEAN_RERUN"):
    ForkRunner.run_clean_tests = lambda self, tests: 0
sys.argv[0] = "mutmut"
cli()
"""


def mutmut(*args: str, tests: list[str] | None = None, clean_rerun: bool = True) -> None:
    env = dict(os.environ)
    if tests:
        env["MUTATE_TESTS"] = json.dumps(tests)
    if not clean_rerun:
        env["MUTATE_NO_CLEAN_RERUN"] = "1"
    subprocess.run([sys.executable, "-c", MUTMUT, *args], cwd=ROOT, env=env, check=True)


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
    # The gateway tests start the npm MCP servers from tools/node_modules (not copied: hundreds of MB).
    node_modules = MUTANTS / "tools" / "node_modules"
    if (ROOT / "tools" / "node_modules").exists() and not node_modules.exists():
        node_modules.parent.mkdir(exist_ok=True)
        node_modules.symlink_to(ROOT / "tools" / "node_modules")


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
    parser.add_argument("--sample", type=int, default=20, help="mutants per package (0: all); default 20")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--report-only", action="store_true", help="print the last results without running")
    parser.add_argument("--tests", nargs="+", help="pytest selection instead of [tool.mutmut]'s")
    parser.add_argument("--clean-rerun", action="store_true", help="also run mutmut's second clean pass")
    parser.add_argument("--names", type=Path, help="check the mutants named in this file (one a line) instead")
    options = parser.parse_args()
    packages = options.package or list(PACKAGES)
    if options.names:
        options.names = options.names.resolve()  # before the working directory changes
    # Everything runs from ROOT: mutmut and its pytest import the working directory's code first.
    os.chdir(ROOT)

    if not options.report_only:
        generate()
    names = {package: sample(list(exit_codes(package)), options.sample) for package in packages}
    if options.names:
        listed = set(options.names.read_text().split())
        names = {package: [n for n in exit_codes(package) if n in listed] for package in packages}
    if not options.report_only:
        # One mutmut run for the packages asked: it checks the clean suite once, not once per package.
        print(", ".join(f"{package}: {len(names[package])} mutants" for package in packages), flush=True)
        mutmut(
            "run",
            "--max-children",
            str(options.max_children),
            *[n for p in packages for n in names[p]],
            tests=options.tests,
            clean_rerun=options.clean_rerun,
        )
    table = []
    for package in packages:
        print(f"== {package}")
        table.append((package, len(names[package]), report(package, names[package])))

    print(f"\n{'package':<24}{'checked':>8}{'killed':>8}{'survived':>10}{'equivalent':>12}{'no tests':>10}{'other':>7}")
    for package, size, counts in table:
        other = size - sum(counts[k] for k in ("killed", "survived", "equivalent", "no tests"))
        print(
            f"{package:<24}{size:>8}{counts['killed']:>8}{counts['survived']:>10}"
            f"{counts['equivalent']:>12}{counts['no tests']:>10}{other:>7}"
        )


if __name__ == "__main__":
    main()
