"""Every environment variable Scout reads is documented, and every documented one is read: the README's
Configuration table and docs/settings.md together, against the variables the code reads (found in the source:
settings' env_* helpers, a secret's ``NAME_FILE``, ``os.environ.get``, ``os.environ[...]``, ``os.getenv``,
``"NAME" in os.environ``). The app's packages are read whole; the test suite, the benchmarks and CI's script for
Scout's own ``SCOUT_*`` switches (the rest there is a parent process talking to a child it starts). Where the page
gives a default as a plain value, it is the one the settings' helper falls back to."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("scoutsite", "catalog", "governance", "search", "mcpgateway")
TOOLING = ("tests", "bench")  # their SCOUT_* switches only
CI_SCRIPT = ROOT / ".ci" / "run"
# Every env_* helper settings defines (read from its source, so a new helper is scanned without a change here).
HELPERS = set(re.findall(r"^def (env_[a-z_]+)\(name", (ROOT / "scoutsite" / "settings.py").read_text(), re.M))
NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")
SHELL_READ = re.compile(r"\$\{?(SCOUT_[A-Z0-9_]+)")


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_environ(node: ast.AST) -> bool:
    return ast.unparse(node) == "os.environ"


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
                (function.attr == "get" and _is_environ(function.value))
                or (function.attr == "getenv" and ast.unparse(function.value) == "os")
            ):
                names.add(name)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if _is_environ(node.value) and (name := _literal(node.slice)):
                names.add(name)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
            if _is_environ(node.comparators[0]) and (name := _literal(node.left)):
                names.add(name)
    return names


def _sources(package: str):
    for path in (ROOT / package).rglob("*.py"):
        if "migrations" not in path.parts:
            yield path.read_text(encoding="utf-8")


def code_reads() -> set[str]:
    names = set()
    for package in PACKAGES:
        for source in _sources(package):
            names |= names_read(source)
    for package in TOOLING:
        for source in _sources(package):
            names |= {name for name in names_read(source) if name.startswith("SCOUT_")}
    return names | set(SHELL_READ.findall(CI_SCRIPT.read_text(encoding="utf-8")))


def table_rows(markdown: str) -> dict[str, list[str]]:
    """Each name in the first cell of a table row, with the row's cells."""
    rows = {}
    for line in markdown.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows.update(dict.fromkeys(NAME.findall(cells[0]), cells))
    return rows


def settings_page() -> dict[str, list[str]]:
    return table_rows((ROOT / "docs" / "settings.md").read_text(encoding="utf-8"))


def documented() -> set[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    configuration = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    return set(table_rows(configuration)) | set(settings_page())


def _constant(node: ast.AST):
    """The value of a literal default (``15 * 60``, ``[...]`` included); None for one computed from other names."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            left, right = _constant(node.left), _constant(node.right)
            if isinstance(left, int | float) and isinstance(right, int | float):
                return left * right
        return None


def code_defaults(source: str) -> dict[str, object]:
    """The literal default each settings helper call falls back to (a missing default: the helper's own)."""
    own = {"env_bool": False, "env_str": ""}
    defaults = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in HELPERS):
            continue
        if not node.args or not (name := _literal(node.args[0])) or node.func.id == "env_secret":
            continue
        keywords = {keyword.arg: keyword.value for keyword in node.keywords}
        given = node.args[1] if len(node.args) > 1 else keywords.get("default")
        value = own.get(node.func.id) if given is None else _constant(given)
        if value is not None:
            defaults[name] = value
    return defaults


UNITS = {"KiB": 1024, "MiB": 1024 * 1024}


def documented_default(cell: str):
    """A default the page gives as a plain value: `300`, `10,000`, `600/minute`, on, off, 256 KiB; else None."""
    if cell in ("on", "off"):
        return cell == "on"
    if match := re.fullmatch(r"(\d+) (KiB|MiB)", cell):
        return int(match[1]) * UNITS[match[2]]
    if match := re.fullmatch(r"`([^`]*)`", cell):
        return match[1]
    return None


def same_default(code, page) -> bool:
    if isinstance(code, bool) or isinstance(page, bool):
        return code == page or (code in (None, "") and page is False)
    if isinstance(code, int | float) and isinstance(page, str | int):
        return float(str(page).replace(",", "")) == float(code)
    if isinstance(code, list):
        return ",".join(code) == page
    return str(code) == str(page)


def test_the_source_scan_finds_each_way_a_variable_is_read():
    source = (
        'A = env_int("A_INT", 1)\nB = env_secret("B_KEY")\nC = os.environ.get("C_GET")\nD = os.environ["D_ITEM"]\n'
        'E = os.getenv("E_GETENV")\nos.environ["F_WRITTEN"] = "x"\nG = os.environ.get(name)\n'
        'H = "H_IN" in os.environ\nI = "I_NOT_IN" not in os.environ\nJ = "J_LIST" in names\n'
    )
    assert names_read(source) == {"A_INT", "B_KEY", "B_KEY_FILE", "C_GET", "D_ITEM", "E_GETENV", "H_IN", "I_NOT_IN"}
    assert SHELL_READ.findall('SEED="${SCOUT_TEST_SEED:-1}" $SCOUT_OTHER') == ["SCOUT_TEST_SEED", "SCOUT_OTHER"]


def test_every_variable_the_code_reads_is_documented_and_every_documented_one_is_read():
    read, written = code_reads(), documented()
    assert "SCOUT_MCP_STATELESS" in read and "OTEL_SERVICE_NAME" in read  # settings and another module scanned
    assert "SCOUT_CELERY_WORKER_TESTS" in read and "SCOUT_TEST_SEED" in read  # the suite's switches and CI's
    assert not sorted(read - written), (
        f"read by the code, in neither the README's table nor docs/settings.md: {sorted(read - written)}"
    )
    assert not sorted(written - read), f"documented, no longer read by the code: {sorted(written - read)}"


def test_the_defaults_the_settings_page_gives_are_the_codes():
    defaults = code_defaults((ROOT / "scoutsite" / "settings.py").read_text(encoding="utf-8"))
    assert defaults["SCOUT_SYNC_INTERVAL"] == 900 and defaults["SCOUT_MCP_STATELESS"] is True  # the scan reads them
    compared, wrong = 0, []
    for name, cells in settings_page().items():
        page = documented_default(cells[1])
        if name in defaults and page is not None:
            compared += 1
            if not same_default(defaults[name], page):
                wrong.append(f"{name}: page {cells[1]}, code {defaults[name]!r}")
    assert compared > 100
    assert not wrong, f"docs/settings.md gives another default than scoutsite/settings.py: {wrong}"
