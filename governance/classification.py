"""Default governance fields from upstream MCP annotations, read as untrusted hints. ORM-free.

Only an explicit ``readOnlyHint: true`` makes a tool "read". Per the MCP spec a non-read-only tool is
destructive unless it says ``destructiveHint: false``, so a tool without annotations counts as a mutating,
irreversible, high-risk tool. Hints can only make a tool look safer than it is, which is why an admin's
classification always wins over them.
"""

from dataclasses import dataclass
from typing import Any

from .choices import OperationClass, Reversibility, RiskLevel


@dataclass(frozen=True)
class Classification:
    operation_class: str
    reversibility: str
    risk: str


def classification_from_annotations(annotations: Any) -> Classification:
    hints = annotations if isinstance(annotations, dict) else {}
    # `is True`: a string "true" or any other non-boolean is not a hint we trust.
    if hints.get("readOnlyHint") is True:
        return Classification(OperationClass.READ, Reversibility.REVERSIBLE, RiskLevel.LOW)
    if hints.get("destructiveHint") is False:
        reversibility = Reversibility.REVERSIBLE if hints.get("idempotentHint") is True else Reversibility.COMPENSATABLE
        return Classification(OperationClass.WRITE, reversibility, RiskLevel.MODERATE)
    return Classification(OperationClass.WRITE, Reversibility.IRREVERSIBLE, RiskLevel.HIGH)
