"""Every third-party package the code imports is pinned where ``make`` installs from: a newcomer's ``make install``
(and CI's fresh virtualenv) gets the versions the code was tested with, not whatever a dependency's range allows
that day. A package pulled in only by another one (``scipy`` by sentence-transformers, ``h11`` by uvicorn) is pinned
too once Scout imports it itself."""

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("scoutsite", "catalog", "governance", "search", "mcpgateway", "tests", "bench", "manage.py")
# Where each requirement file's packages are installed from: the app's (make install), the load suite's own
# virtualenv (make load), mutmut beside the app (make mutate); torch from the Makefile, before requirements.txt.
REQUIREMENT_FILES = ("requirements.txt", "requirements-load.txt", "requirements-mutate.txt")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(==|>=)", re.MULTILINE)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned() -> set[str]:
    names = {_normalized(m[1]) for f in REQUIREMENT_FILES for m in PIN.finditer((ROOT / f).read_text(encoding="utf-8"))}
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return names | {_normalized(name) for name in re.findall(r"pip install --quiet ([A-Za-z0-9_-]+)==", makefile)}


def imported(path: Path) -> set[str]:
    """Top-level modules ``path`` imports absolutely."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules


def _local(module: str, path: Path) -> bool:
    """Scout's own package, or a script's sibling module (``bench/`` scripts import each other)."""
    here = path.parent
    return (ROOT / module).is_dir() or (here / f"{module}.py").exists() or (here / module).is_dir()


def third_party_imports() -> dict[frozenset[str], set[str]]:
    """The distributions of each imported module, with the files importing it."""
    distributions = packages_distributions()
    found: dict[frozenset[str], set[str]] = {}
    for entry in SCANNED:
        paths = [ROOT / entry] if entry.endswith(".py") else (ROOT / entry).rglob("*.py")
        for path in paths:
            for module in imported(path):
                if module in sys.stdlib_module_names or _local(module, path):
                    continue
                # A namespace package (opentelemetry) is several distributions: one of them pinned is enough. One
                # not installed here (locust, mutmut: their own virtualenv or target) is its own name.
                names = frozenset(_normalized(name) for name in distributions.get(module, [module]))
                found.setdefault(names, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_pinned():
    found, pins = third_party_imports(), pinned()
    assert {frozenset({"django"}), frozenset({"torch"}), frozenset({"locust"})} <= set(found)  # the scan sees them
    missing = {" / ".join(sorted(names)): sorted(paths)[:2] for names, paths in found.items() if not names & pins}
    assert not missing, f"imported, not pinned in {', '.join(REQUIREMENT_FILES)} or the Makefile: {missing}"
