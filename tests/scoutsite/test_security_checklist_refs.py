"""Every test docs/security-checklist.md names exists: a row citing a test that was renamed, merged or deleted
claims a coverage nobody runs (four such references were found when tests were merged into subtests)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# ``tests/x.py::test_name`` and, for a check run as a subtest, ``tests/x.py::test_name (check_name)``.
REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(\w+)(?: \((\w+)\))?")


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_test_the_security_checklist_names_exists():
    text = (ROOT / "docs" / "security-checklist.md").read_text()
    references = REFERENCE.findall(text)
    assert len(references) > 100  # the checklist cites its tests this way
    missing = []
    for file, name, check in sorted(set(references)):
        path = ROOT / file
        functions = _functions(path) if path.is_file() else set()
        if name not in functions or (check and f"_{check}" not in functions and check not in functions):
            missing.append(f"{file}::{name}" + (f" ({check})" if check else ""))
    assert missing == []
