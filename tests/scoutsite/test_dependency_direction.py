"""The code's own imports keep the layering of STYLE.md: apps depend one way (mcpgateway -> search -> governance ->
catalog; react upward with a signal or task), and selectors (reads) never import services (writes). Read from the
source, every import statement, those inside functions too (a deferred import is still a dependency)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["catalog", "governance", "search", "mcpgateway"]  # each may import only those before it


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved against its package)."""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    if path.name == "__init__.py":
        package = path.relative_to(ROOT).parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}  # `from . import services`
    return names


def _sources(app: str) -> list[Path]:
    return [path for path in sorted((ROOT / app).rglob("*.py")) if "migrations" not in path.parts]


@pytest.mark.parametrize("app", LAYERS)
def test_apps_import_only_the_layers_below_them(app):
    above = LAYERS[LAYERS.index(app) + 1 :]
    found = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _sources(app)
        for name in _imports(path)
        if name.split(".")[0] in above
    }
    assert not found


@pytest.mark.parametrize("app", LAYERS)
def test_selectors_never_import_services(app):
    selectors = [path for path in _sources(app) if "selectors" in path.relative_to(ROOT).with_suffix("").parts]
    found = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in selectors
        for name in _imports(path)
        if "services" in name.split(".")
    }
    assert not found
