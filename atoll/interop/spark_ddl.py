"""Spark's DDL schema syntax (``"id long, name string"``), parsed in pure Python.

:func:`parse_ddl` turns a DDL string into a ``pyspark.sql.types.StructType`` without a Spark session, so a bad
schema fails when a stream is built, before any Spark session exists. It mirrors what Spark's ``DataType`` parser
accepts for schemas; see :mod:`atoll.interop.spark_schema` for how the Spark edge uses schemas.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

__all__ = ["parse_ddl"]


_TOKEN = re.compile(r"""
    \s*(?:
      (?P<quoted>`(?:[^`]|``)*`)
    | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<number>\d+)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct>[<>(),:])
    )""", re.VERBOSE)


class _DDLParser:
    def __init__(self, text: str):
        self.text = text
        self.tokens: List[Tuple[str, str, int]] = []  # (kind, value, position)
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                self.fail(f"unexpected character {text[pos:].lstrip()[:1]!r}", len(text) - len(text[pos:].lstrip()))
            kind = m.lastgroup
            value = m.group(kind)
            start = m.start(kind)
            if kind == "quoted":
                value = value[1:-1].replace("``", "`")
            self.tokens.append((kind, value, start))
            pos = m.end()
        self.i = 0

    def fail(self, message: str, position: Optional[int] = None):
        if position is None:
            position = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
        raise ValueError(f"cannot parse schema {self.text!r}: {message} at position {position}")

    def peek(self, offset: int = 0) -> Optional[Tuple[str, str, int]]:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def next(self, what: str) -> Tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            self.fail(f"expected {what}, found the end")
        self.i += 1
        return tok

    def accept_punct(self, p: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "punct" and tok[1] == p:
            self.i += 1
            return True
        return False

    def expect_punct(self, p: str):
        if not self.accept_punct(p):
            tok = self.peek()
            self.fail(f"expected {p!r}, found {tok[1]!r}" if tok else f"expected {p!r}, found the end")

    def accept_word(self, w: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "word" and tok[1].lower() == w:
            self.i += 1
            return True
        return False

    def number(self) -> int:
        kind, value, _ = self.next("a number")
        if kind != "number":
            self.i -= 1
            self.fail(f"expected a number, found {value!r}")
        return int(value)

    # schema := fields | struct<fields>
    def schema(self):
        from pyspark.sql.types import StructType

        tok0, tok1 = self.peek(), self.peek(1)
        if (tok0 is not None and tok0[0] == "word" and tok0[1].lower() == "struct"
                and tok1 is not None and tok1[1] == "<"):
            save = self.i
            dt = self.data_type()
            if self.peek() is None:
                return dt
            self.i = save
        if self.peek() is None:
            return StructType([])
        fields = self.fields()
        if self.peek() is not None:
            self.fail(f"unexpected {self.peek()[1]!r}")
        return StructType(fields)

    def fields(self):
        fields = []
        names = set()
        while True:
            f = self.field()
            if f.name.lower() in names:
                self.fail(f"duplicate column {f.name!r}", self.tokens[self.i - 1][2])
            names.add(f.name.lower())
            fields.append(f)
            if not self.accept_punct(","):
                break
        return fields

    def field(self):
        from pyspark.sql.types import StructField

        kind, name, pos = self.next("a column name")
        if kind not in ("word", "quoted"):
            self.i -= 1
            self.fail(f"expected a column name, found {name!r}")
        self.accept_punct(":")
        dt = self.data_type()
        nullable = True
        metadata = None
        while True:
            if self.accept_word("not"):
                if not self.accept_word("null"):
                    self.fail("expected NULL after NOT")
                nullable = False
            elif self.accept_word("comment"):
                kind, text, _ = self.next("a comment string")
                if kind != "string":
                    self.i -= 1
                    self.fail("expected a quoted comment")
                metadata = {"comment": _unquote(text)}
            else:
                break
        return StructField(name, dt, nullable, metadata)

    def data_type(self):
        from pyspark.sql import types as T

        kind, word, pos = self.next("a type")
        if kind != "word":
            self.i -= 1
            self.fail(f"expected a type, found {word!r}")
        w = word.lower()
        simple = {
            "boolean": T.BooleanType, "bool": T.BooleanType,
            "tinyint": T.ByteType, "byte": T.ByteType,
            "smallint": T.ShortType, "short": T.ShortType,
            "int": T.IntegerType, "integer": T.IntegerType,
            "bigint": T.LongType, "long": T.LongType,
            "float": T.FloatType, "real": T.FloatType,
            "double": T.DoubleType,
            "string": T.StringType,
            "binary": T.BinaryType,
            "date": T.DateType,
            "timestamp": T.TimestampType, "timestamp_ltz": T.TimestampType,
            "timestamp_ntz": T.TimestampNTZType,
            "void": T.NullType,
        }
        if w in simple:
            return simple[w]()
        if w in ("char", "varchar", "character"):
            self.expect_punct("(")
            self.number()
            self.expect_punct(")")
            return T.StringType()  # Spark stores CHAR/VARCHAR columns as strings
        if w in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.accept_punct("("):
                precision = self.number()
                if self.accept_punct(","):
                    scale = self.number()
                self.expect_punct(")")
            if not (1 <= precision <= 38) or not (0 <= scale <= precision):
                self.fail(f"decimal({precision},{scale}) is out of range (precision 1..38, scale 0..precision)", pos)
            return T.DecimalType(precision, scale)
        if w == "array":
            self.expect_punct("<")
            element = self.data_type()
            self.expect_punct(">")
            return T.ArrayType(element, True)
        if w == "map":
            self.expect_punct("<")
            key = self.data_type()
            self.expect_punct(",")
            value = self.data_type()
            self.expect_punct(">")
            return T.MapType(key, value, True)
        if w == "struct":
            self.expect_punct("<")
            if self.accept_punct(">"):
                return T.StructType([])
            fields = self.fields()
            self.expect_punct(">")
            return T.StructType(fields)
        if w == "interval":
            self.fail("interval types are not supported at Atoll's Spark edge", pos)
        self.fail(f"unknown type {word!r}", pos)


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def parse_ddl(ddl: str):
    """Parse a Spark DDL schema string into a ``pyspark.sql.types.StructType``, without a Spark session.

    Accepts what Spark's own parser accepts for schemas: ``"id long, name string"``, ``"a: int, b: string"``,
    ``"struct<a:int,b:string>"``, back-quoted names, ``NOT NULL``, ``COMMENT '...'``, the type aliases
    (``int``/``integer``, ``bigint``/``long``, ``decimal(p,s)``/``dec``/``numeric``, ``char(n)``/``varchar(n)``
    read as ``string``, ``timestamp``/``timestamp_ltz``, ``timestamp_ntz``, ...) and nesting
    (``array<...>``, ``map<...,...>``, ``struct<...>``). Case does not matter. Raises ``ValueError`` naming the
    position of the problem.
    """
    if not isinstance(ddl, str):
        raise TypeError(f"parse_ddl: ddl must be a string, got {type(ddl).__name__}")
    from pyspark.sql.types import StructType

    result = _DDLParser(ddl).schema()
    if not isinstance(result, StructType):  # pragma: no cover - schema() only returns structs
        raise ValueError(f"cannot parse schema {ddl!r}: not a struct")
    return result
