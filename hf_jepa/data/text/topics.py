"""Coarse classes of CPython's pydoc topics (`TOPIC_GROUPS`): the `label` column of the embedded corpus, used by
`topic_classification_task`."""

# Coarse classes of the pydoc topics for `topic_classification_task`: one explicit entry per topic of CPython 3.11's
# `pydoc_data.topics` (79 topics). Sections follow the Python Language Reference / Library Reference chapters the
# topics come from. A topic missing here (another Python version) is put in "other".
TOPIC_GROUPS: dict[str, tuple[str, ...]] = {
    # Language Reference ch. 7-8: simple and compound statements.
    "statements": (
        "assert",
        "assignment",
        "async",
        "augassign",
        "break",
        "class",
        "compound",
        "continue",
        "del",
        "else",
        "for",
        "function",
        "global",
        "if",
        "import",
        "nonlocal",
        "pass",
        "raise",
        "return",
        "try",
        "while",
        "with",
        "yield",
    ),
    # Language Reference ch. 6: expressions and operators.
    "expressions": (
        "atom-identifiers",
        "atom-literals",
        "attribute-references",
        "await",
        "binary",
        "bitwise",
        "booleans",
        "calls",
        "comparisons",
        "conversions",
        "dict",
        "exprlists",
        "in",
        "lambda",
        "lists",
        "operator-summary",
        "power",
        "shifting",
        "slicings",
        "subscriptions",
        "unary",
    ),
    # Language Reference ch. 2 (lexical analysis: identifiers and literals) and the format-string mini-language.
    "lexical": (
        "floating",
        "formatstrings",
        "id-classes",
        "identifiers",
        "imaginary",
        "integers",
        "numbers",
        "strings",
    ),
    # Language Reference ch. 3: the data model and special methods.
    "data_model": (
        "attribute-access",
        "callable-types",
        "context-managers",
        "customization",
        "numeric-types",
        "objects",
        "sequence-types",
        "specialattrs",
        "specialnames",
        "types",
    ),
    # Library Reference "Built-in Types".
    "builtin_types": (
        "bltin-code-objects",
        "bltin-ellipsis-object",
        "bltin-null-object",
        "bltin-type-objects",
        "string-methods",
        "truth",
        "typesfunctions",
        "typesmapping",
        "typesmethods",
        "typesmodules",
        "typesseq",
        "typesseq-mutable",
    ),
    # Language Reference ch. 4 (execution model, names, exceptions) and the debugger.
    "execution": ("debugger", "dynamic-features", "exceptions", "execmodel", "naming"),
}
OTHER_GROUP = "other"
COARSE_LABELS: tuple[str, ...] = tuple(TOPIC_GROUPS) + (OTHER_GROUP,)
_TOPIC_TO_GROUP = {topic: group for group, topics in TOPIC_GROUPS.items() for topic in topics}


def topic_groups() -> dict[str, str]:
    """pydoc topic -> coarse class, for every topic of this Python's `pydoc_data.topics` (unknown ones: "other")."""
    from pydoc_data.topics import topics

    return {topic: topic_group(topic) for topic in sorted(topics)}


def topic_group(topic: str) -> str:
    """The coarse class of one pydoc topic (`TOPIC_GROUPS`), `"other"` for a topic the mapping does not list."""
    return _TOPIC_TO_GROUP.get(topic, OTHER_GROUP)
