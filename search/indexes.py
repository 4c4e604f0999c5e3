"""What is indexed per tool, and how much each field weighs (NetBox ``SearchIndex``-style declaration).

Sparse weights are repeat counts: a field's tokens are added ``weight`` times to the BM25 document, so a
term in the tool name counts three times a term in the description. Dense kinds say which texts get their
own vector; a tool scores by its best vector (multi-vector, max-sim).

| field              | BM25 weight | why                                                                   |
|--------------------|-------------|-----------------------------------------------------------------------|
| name, name_split   | 3           | exact and split names are the strongest lexical evidence (RETRIEVAL-NOTES) |
| title, aliases     | 2           | curated names                                                         |
| examples, keywords | 2           | curated requests and terms, written in users' words                   |
| purpose            | 2           | curated summary                                                       |
| verbs, entities    | 1           | short curated lists; repeating them would swamp long documents        |
| server, description, parameters | 1 | context; dropping parameters loses multi-step recall (notes)       |
| server_description | 1           | domain context (SCOUT §6.1)                                           |
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexedField:
    name: str
    weight: int
    label: str


class ToolSearchIndex:
    """The declaration the document builder and why-matched explanations read."""

    fields: tuple[IndexedField, ...] = (
        IndexedField("name", 3, "name"),
        IndexedField("name_split", 3, "name"),
        IndexedField("title", 2, "title"),
        IndexedField("aliases", 2, "alias"),
        IndexedField("server", 1, "server"),
        IndexedField("server_description", 1, "server description"),
        IndexedField("purpose", 2, "purpose"),
        IndexedField("description", 1, "description"),
        IndexedField("parameters", 1, "parameters"),
        IndexedField("keywords", 2, "keyword"),
        IndexedField("verbs", 1, "operation verb"),
        IndexedField("entities", 1, "entity type"),
        IndexedField("examples", 2, "example request"),
    )
    # Learned requests (real users' words) in BM25: each term once, at ``learned_weight`` times the learned
    # request's weight (0.6 for one principal, at most 0.9): 1.2 to 1.8, below a curated example's 2, and half
    # that for a word only one of the tool's learned requests has (engine/sparse.py). Never shown in
    # explanations (another user's words).
    learned_weight: float = 2.0
    # Dense vectors per tool: the whole document, "name (server): first sentence", each example request.
    dense_kinds: tuple[str, ...] = ("document", "summary", "example")
    # Characters of the dense document text kept (the model truncates at 256 word pieces anyway).
    dense_document_chars: int = 2000
    # Display attributes a match carries.
    display: tuple[str, ...] = ("tool_id", "title", "server")

    @classmethod
    def weights(cls) -> dict[str, int]:
        return {f.name: f.weight for f in cls.fields}

    @classmethod
    def label(cls, field_name: str) -> str:
        return next((f.label for f in cls.fields if f.name == field_name), field_name)
