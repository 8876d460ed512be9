"""CEL's types as the checker names them, the rules on them, and the names of values' types."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Final

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1

INT: Final = "int"
UINT: Final = "uint"
DOUBLE: Final = "double"
STRING: Final = "string"
BOOL: Final = "bool"
NULL: Final = "null_type"
LIST: Final = "list"
MAP: Final = "map"
DYN: Final = "dyn"

_NUMERIC: Final = frozenset({INT, UINT, DOUBLE})
_SCALARS: Final = frozenset({INT, UINT, DOUBLE, BOOL, NULL})
"""Types whose values compare in constant time."""
_ORDERED: Final = frozenset({INT, UINT, DOUBLE, STRING, BOOL})
_PY_TYPE: Final = {
    INT: "_int",
    UINT: "_int",
    DOUBLE: "_float",
    STRING: "_str",
    BOOL: "_bool",
    LIST: "_list",
    MAP: "_dict",
}
"""The global naming the Python type of each static type's values."""

_ARITHMETIC: Final = {
    "+": frozenset({INT, UINT, DOUBLE, STRING, LIST}),
    "-": frozenset({INT, UINT, DOUBLE}),
    "*": frozenset({INT, UINT, DOUBLE}),
    "/": frozenset({INT, UINT, DOUBLE}),
    "%": frozenset({INT, UINT}),
}
"""For each arithmetic operator, the types T for which ``T op T`` exists (and gives a T)."""

_PY_BINOP: Final[dict[str, Callable[[], ast.operator]]] = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
}
_PY_CMPOP: Final[dict[str, Callable[[], ast.cmpop]]] = {
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
    "==": ast.Eq,
    "!=": ast.NotEq,
}


_FUNCTIONS: Final = {
    "size": 1,
    "int": 1,
    "uint": 1,
    "double": 1,
    "string": 1,
    "bool": 1,
    "dyn": 1,
}
_METHODS: Final = {
    "size": 0,
    "startsWith": 1,
    "endsWith": 1,
    "contains": 1,
    "matches": 1,
    "lower": 0,
    "upper": 0,
}
_EXTENSION_METHODS: Final[dict[str, tuple[str, tuple[tuple[str, ...], ...], str]]] = {
    # The strings extension (cel-go's ext/strings.go): name: (the receiver's type, the
    # argument types of each overload, the result type).
    "charAt": ("string", (("int",),), "string"),
    "indexOf": ("string", (("string",), ("string", "int")), "int"),
    "lastIndexOf": ("string", (("string",), ("string", "int")), "int"),
    "lowerAscii": ("string", ((),), "string"),
    "upperAscii": ("string", ((),), "string"),
    "trim": ("string", ((),), "string"),
    "reverse": ("string", ((),), "string"),
    "replace": ("string", (("string", "string"), ("string", "string", "int")), "string"),
    "split": ("string", (("string",), ("string", "int")), "list"),
    "substring": ("string", (("int",), ("int", "int")), "string"),
    "join": ("list", ((), ("string",)), "string"),
    "format": ("string", (("list",),), "string"),
}
_NAMESPACED: Final = frozenset({"math.greatest", "math.least", "strings.quote"})
"""Functions with a qualified name (``math.greatest(1, 2)``), parsed as one name."""
_MACROS: Final = {"all": (2,), "exists": (2,), "exists_one": (2,), "map": (2, 3), "filter": (2,)}
_CONVERSIONS: Final = {
    # name: (result type, the argument types it accepts)
    "int": (INT, frozenset({INT, UINT, DOUBLE, STRING, DYN})),
    "uint": (UINT, frozenset({INT, UINT, DOUBLE, STRING, DYN})),
    "double": (DOUBLE, frozenset({INT, UINT, DOUBLE, STRING, DYN})),
    "string": (STRING, frozenset({INT, UINT, DOUBLE, STRING, BOOL, DYN})),
    "bool": (BOOL, frozenset({BOOL, STRING, DYN})),
}


_TYPE_NAMES: Final[dict[type, str]] = {
    bool: BOOL,
    int: INT,
    float: DOUBLE,
    str: STRING,
    type(None): NULL,
    list: LIST,
    tuple: LIST,
    dict: MAP,
    bytes: "bytes",
}
_PYTHON_TYPE_NAMES: Final = {
    "str": STRING,
    "float": DOUBLE,
    "NoneType": NULL,
    "dict": MAP,
    "tuple": LIST,
}


def _type_name(value: object) -> str:
    name = _TYPE_NAMES.get(type(value))
    if name is not None:
        return name
    if isinstance(value, Mapping):
        return MAP
    if isinstance(value, list | tuple):
        return LIST
    return type(value).__name__


def _show_key(key: object) -> str:
    if type(key) is bool:
        return "true" if key else "false"
    return str(key)
