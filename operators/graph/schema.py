"""The schema language of typed inputs: what an ``input`` node's ``"schema"`` declares.

A schema is an object of field -> type::

    {"key": "string", "value": "int64", "tags": {"list": "string"},
     "where": {"object": {"lat": "float64", "lon": "float64"}, "nullable": true}}

A type is ``"int64"``, ``"uint64"``, ``"float64"``, ``"string"`` or ``"bool"``, nullable
with a trailing ``?`` (``"string?"``); a list is ``{"list": T}``; a nested object is
``{"object": {field: T, ...}}``; a list or an object is nullable with ``"nullable": true``
beside. Fields are not nullable unless marked. A record of the input is an object with
exactly these fields (a nullable field may be left out: it is then null).

:func:`parse_schema` reads one when a graph is submitted, reporting every problem with a
JSON pointer as the graph's other problems are; :meth:`Schema.arrow_type` is the Arrow
struct type records of the input travel as (one field per field, nullability kept).
pyarrow is imported only there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import pyarrow as pa

Problems = list[tuple[str, str]]
"""Problems found: ``(JSON pointer, message)`` pairs (the graph's ``Problem``s are made of
them by :mod:`operators.graph.spec`, which imports this module)."""

SCALARS: Final = ("int64", "uint64", "float64", "string", "bool")
"""The scalar types, by their names in a schema."""

MAX_FIELDS: Final = 1000
"""The most fields one object of a schema may declare."""

MAX_DEPTH: Final = 32
"""How deeply lists and objects may nest in a schema (a record's depth is bounded too)."""

_MESSAGE: Final = (
    'a type is "int64", "uint64", "float64", "string" or "bool" (nullable with a trailing "?"), '
    '{"list": <type>} or {"object": {<field>: <type>, ...}} (nullable with "nullable": true)'
)


@dataclass(frozen=True, slots=True)
class FieldType:
    """One type of a schema: a scalar (``kind`` is its name), a list, or an object.

    ``item`` is a list's item type; ``fields`` an object's fields, in declaration order.
    """

    kind: str
    nullable: bool = False
    item: FieldType | None = None
    fields: tuple[Field, ...] = ()

    def describe(self) -> Any:
        """The type as a schema writes it."""
        if self.kind in SCALARS:
            return self.kind + ("?" if self.nullable else "")
        described: dict[str, Any]
        if self.kind == "list":
            assert self.item is not None
            described = {"list": self.item.describe()}
        else:
            described = {"object": {f.name: f.type.describe() for f in self.fields}}
        if self.nullable:
            described["nullable"] = True
        return described

    def arrow(self) -> pa.DataType:
        """The Arrow type of values of this type (nullability is the field's)."""
        import pyarrow as pa

        if self.kind == "list":
            assert self.item is not None
            return pa.list_(pa.field("item", self.item.arrow(), self.item.nullable))
        if self.kind == "object":
            return pa.struct([f.arrow() for f in self.fields])
        return _scalar(self.kind)

    def depth(self) -> int:
        """How many lists and objects a value of this type nests (a scalar is 0)."""
        if self.kind == "list":
            assert self.item is not None
            return 1 + self.item.depth()
        if self.kind == "object":
            return 1 + max((f.type.depth() for f in self.fields), default=0)
        return 0


@dataclass(frozen=True, slots=True)
class Field:
    """A named field of an object (or of a record)."""

    name: str
    type: FieldType

    def arrow(self) -> pa.Field:
        """The Arrow field: its name, its type, and whether it may be null."""
        import pyarrow as pa

        return pa.field(self.name, self.type.arrow(), self.type.nullable)


@dataclass(frozen=True, slots=True)
class Schema:
    """A typed input's schema: the fields of its records, in declaration order."""

    fields: tuple[Field, ...]

    def describe(self) -> dict[str, Any]:
        """The schema as the graph declared it (types in their canonical spelling)."""
        return {f.name: f.type.describe() for f in self.fields}

    def arrow_type(self) -> pa.StructType:
        """The Arrow struct type of the records: one field per field, nullability kept.

        >>> parse_schema({"key": "string", "n": "int64?"}, "", []).arrow_type()
        StructType(struct<key: string not null, n: int64>)
        """
        import pyarrow as pa

        return pa.struct([f.arrow() for f in self.fields])

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of a batch of records: one column per field."""
        import pyarrow as pa

        return pa.schema([f.arrow() for f in self.fields])

    def depth(self) -> int:
        """How many lists and objects a record nests (the record itself is 1)."""
        return 1 + max((f.type.depth() for f in self.fields), default=0)


def _scalar(name: str) -> pa.DataType:
    import pyarrow as pa

    made = {"int64": pa.int64, "uint64": pa.uint64, "float64": pa.float64, "string": pa.string}
    return made.get(name, pa.bool_)()


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def parse_schema(value: Any, pointer: str, problems: Problems) -> Schema:
    """A schema from its JSON form; each problem (pointer, message) goes to ``problems``.

    What is returned when there are problems is only a placeholder (the graph is refused).

    >>> problems = []
    >>> schema = parse_schema({"n": "int32", "tags": {"list": "string?"}}, "/s", problems)
    >>> schema.describe(), [(at, message[:20]) for at, message in problems]
    ({'tags': {'list': 'string?'}}, [('/s/n', "unknown type 'int32'")])
    """
    fields = _parse_fields(value, pointer, problems, 0)
    return Schema(fields)


def _parse_fields(value: Any, pointer: str, problems: Problems, depth: int) -> tuple[Field, ...]:
    if not isinstance(value, dict) or not value:
        problems.append((pointer, "must be a non-empty object of field -> type"))
        return ()
    if len(value) > MAX_FIELDS:
        problems.append((pointer, f"at most {MAX_FIELDS} fields are allowed"))
        return ()
    fields: list[Field] = []
    for name, kind in value.items():
        at = f"{pointer}/{_escape(str(name))}"
        if not isinstance(name, str) or not name:
            problems.append((at, "a field name is a non-empty string"))
            continue
        parsed = _parse_type(kind, at, problems, depth)
        if parsed is not None:
            fields.append(Field(name, parsed))
    return tuple(fields)


def _parse_type(value: Any, pointer: str, problems: Problems, depth: int) -> FieldType | None:
    if isinstance(value, str):
        name, nullable = (value[:-1], True) if value.endswith("?") else (value, False)
        if name in SCALARS:
            return FieldType(name, nullable)
        problems.append((pointer, f"unknown type {value!r}: {_MESSAGE}"))
        return None
    if not isinstance(value, dict) or len(set(value) & {"list", "object"}) != 1:
        problems.append((pointer, _MESSAGE))
        return None
    kind = "list" if "list" in value else "object"
    extra = sorted(str(k) for k in value if k not in (kind, "nullable"))
    problems.extend((f"{pointer}/{_escape(k)}", f"unknown field {k!r}") for k in extra)
    nullable = value.get("nullable", False)
    if type(nullable) is not bool:
        problems.append((f"{pointer}/nullable", "nullable must be true or false"))
        nullable = False
    if depth + 1 > MAX_DEPTH:
        problems.append((pointer, f"at most {MAX_DEPTH} lists and objects may nest"))
        return None
    if kind == "list":
        item = _parse_type(value["list"], f"{pointer}/list", problems, depth + 1)
        return None if item is None else FieldType("list", nullable, item)
    fields = _parse_fields(value["object"], f"{pointer}/object", problems, depth + 1)
    return FieldType("object", nullable, fields=fields)


__all__ = ["MAX_DEPTH", "MAX_FIELDS", "SCALARS", "Field", "FieldType", "Schema", "parse_schema"]


def schema_of(arrow: pa.DataType) -> Schema | None:
    """The schema whose records have the Arrow struct type ``arrow`` (``None``: none has).

    What a typed stream's records are, in the schema language: a struct of fields the
    language can say (its scalars, lists and objects, nullability kept); any other type
    (not a struct, or a field of a type the language has no name for) has no schema.

    >>> import pyarrow as pa
    >>> schema_of(pa.struct([("key", pa.string()), ("n", pa.int64())])).describe()
    {'key': 'string?', 'n': 'int64?'}
    >>> schema_of(pa.int64()) is None
    True
    """
    import pyarrow as pa

    if not pa.types.is_struct(arrow):
        return None
    fields = _fields_of(arrow)
    return None if fields is None else Schema(fields)


def _fields_of(arrow: pa.StructType) -> tuple[Field, ...] | None:
    fields = []
    for index in range(arrow.num_fields):
        found = arrow.field(index)
        kind = _type_of(found.type, found.nullable)
        if kind is None:
            return None
        fields.append(Field(found.name, kind))
    return tuple(fields)


def _type_of(arrow: pa.DataType, nullable: bool) -> FieldType | None:
    import pyarrow as pa

    names = {pa.int64(): "int64", pa.uint64(): "uint64", pa.float64(): "float64"}
    names.update({pa.string(): "string", pa.bool_(): "bool"})
    if arrow in names:
        return FieldType(names[arrow], nullable)
    if pa.types.is_list(arrow):
        item = _type_of(arrow.value_type, arrow.value_field.nullable)
        return None if item is None else FieldType("list", nullable, item)
    if pa.types.is_struct(arrow):
        fields = _fields_of(arrow)
        return None if fields is None else FieldType("object", nullable, fields=fields)
    return None
