"""Every environment variable Scout reads is documented, and every documented one is read: the README's
Configuration table and docs/settings.md together, against the variables the code reads (found in the source:
settings' env_* helpers, a secret's ``NAME_FILE``, ``os.environ.get``, ``os.environ[...]``, ``os.getenv``)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("scoutsite", "catalog", "governance", "search", "mcpgateway")
HELPERS = {"env_str", "env_bool", "env_int", "env_float", "env_rate", "env_list", "env_secret"}
NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def names_read(source: str) -> set[str]:
    """The environment variables one module reads by a literal name (a name held in a variable, such as a
    server's credential, is the operator's own and not a setting)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and (name := _literal(node.args[0])):
            function = node.func
            if isinstance(function, ast.Name) and function.id in HELPERS:
                names.add(name)
                if function.id == "env_secret":
                    names.add(f"{name}_FILE")
            elif isinstance(function, ast.Attribute) and (
                (function.attr == "get" and ast.unparse(function.value) == "os.environ")
                or (function.attr == "getenv" and ast.unparse(function.value) == "os")
            ):
                names.add(name)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if ast.unparse(node.value) == "os.environ" and (name := _literal(node.slice)):
                names.add(name)
    return names


def code_reads() -> set[str]:
    names = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                names |= names_read(path.read_text(encoding="utf-8"))
    return names


def table_names(markdown: str) -> set[str]:
    """The names in the first cell of each table row."""
    names = set()
    for line in markdown.splitlines():
        if line.startswith("| `"):
            names.update(NAME.findall(line.split("|")[1]))
    return names


def documented() -> set[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    configuration = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    return table_names(configuration) | table_names((ROOT / "docs" / "settings.md").read_text(encoding="utf-8"))


def test_the_source_scan_finds_each_way_a_variable_is_read():
    source = (
        'A = env_int("A_INT", 1)\nB = env_secret("B_KEY")\nC = os.environ.get("C_GET")\nD = os.environ["D_ITEM"]\n'
        'E = os.getenv("E_GETENV")\nos.environ["F_WRITTEN"] = "x"\nG = os.environ.get(name)\n'
    )
    assert names_read(source) == {"A_INT", "B_KEY", "B_KEY_FILE", "C_GET", "D_ITEM", "E_GETENV"}


def test_every_variable_the_code_reads_is_documented_and_every_documented_one_is_read():
    read, written = code_reads(), documented()
    assert "SCOUT_MCP_STATELESS" in read and "OTEL_SERVICE_NAME" in read  # settings and another module scanned
    assert not sorted(read - written), (
        f"read by the code, in neither the README's table nor docs/settings.md: {sorted(read - written)}"
    )
    assert not sorted(written - read), f"documented, no longer read by the code: {sorted(written - read)}"
