"""Lexing: tokens from the source text."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final, NoReturn

from operators.graph.cel.core import ExpressionError
from operators.graph.cel.types import UINT64_MAX

# --------------------------------------------------------------------------- lexer

_RESERVED: Final = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
_OPERATORS: Final = tuple(
    [
        "==",
        "!=",
        "<=",
        ">=",
        "&&",
        "||",
        "<",
        ">",
        "!",
        "+",
        "-",
        "*",
        "/",
        "%",
        "?",
        ":",
        ".",
        ",",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
    ]
)
"""Two-character operators first, so that ``<=`` is not lexed as ``<`` then ``=``."""
_SPACE = re.compile(r"(?:[ \t\n\r\f]+|//[^\r\n]*)+")
_WORD = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_QUOTED_NAME = re.compile(r"`([_a-zA-Z0-9.\-/ ]+)`")
"""The spec's ESCAPED_IDENT: a field name in backquotes."""
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+[uU]?"
    r"|(?:[0-9]+\.[0-9]+|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|[0-9]+[eE][+-]?[0-9]+"
    r"|[0-9]+[uU]?"
)
_STRING_PREFIXES: Final = frozenset(
    ["r", "R", "b", "B", "rb", "rB", "Rb", "RB", "br", "bR", "Br", "BR"]
)
_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "?": "?",
    '"': '"',
    "'": "'",
    "`": "`",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    """``int``, ``uint``, ``double``, ``string``, ``bool``, ``null``, ``ident``, ``reserved`` (a
    reserved word), ``quoted`` (a backquoted name), ``op`` or ``eof``."""
    text: str
    value: object
    pos: int


class _Lexer:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str, pos: int) -> NoReturn:
        raise ExpressionError(message, pos, self.source)

    def tokens(self) -> list[_Token]:
        source = self.source
        tokens: list[_Token] = []
        i, n = 0, len(source)
        while True:
            space = _SPACE.match(source, i)
            if space is not None:
                i = space.end()
            if i >= n:
                tokens.append(_Token("eof", "", None, n))
                return tokens
            char = source[i]
            if char in _DIGITS or (char == "." and source[i + 1 : i + 2] in _DIGITS):
                token, i = self.number(i)
            elif (word := _WORD.match(source, i)) is not None:
                text = word.group()
                if text in _STRING_PREFIXES and source[word.end() : word.end() + 1] in ('"', "'"):
                    if "b" in text or "B" in text:
                        self.fail("bytes literals are not supported", i)
                    token, i = self.string(i, word.end(), raw=True)
                else:
                    token, i = self.word(text, i), word.end()
            elif char in "\"'":
                token, i = self.string(i, i, raw=False)
            elif char == "`":  # a backquoted field name: m.`a/b`
                quoted = _QUOTED_NAME.match(source, i)
                if quoted is None:
                    self.fail("invalid backquoted name", i)
                token, i = _Token("quoted", quoted.group(), quoted.group(1), i), quoted.end()
            else:
                for op in _OPERATORS:
                    if source.startswith(op, i):
                        token, i = _Token("op", op, op, i), i + len(op)
                        break
                else:
                    self.fail(f"unexpected character {char!r}", i)
            tokens.append(token)

    def word(self, text: str, pos: int) -> _Token:
        if text in ("true", "false"):
            return _Token("bool", text, text == "true", pos)
        if text == "null":
            return _Token("null", text, None, pos)
        if text == "in":
            return _Token("op", text, text, pos)
        if text in _RESERVED:  # only a field or method name (the parser says)
            return _Token("reserved", text, text, pos)
        return _Token("ident", text, text, pos)

    def number(self, pos: int) -> tuple[_Token, int]:
        match = _NUMBER.match(self.source, pos)
        if match is None:  # pragma: no cover - the caller saw a digit
            self.fail("invalid number", pos)
        text = match.group()
        end = match.end()
        if text[:2] in ("0x", "0X"):
            unsigned = text[-1] in "uU"
            value = int(text[2 : -1 if unsigned else None], 16)
        elif any(c in text for c in ".eE"):
            number = float(text)
            if math.isinf(number):
                self.fail(f"double literal out of range: {text}", pos)
            return _Token("double", text, number, pos), end
        else:
            unsigned = text[-1] in "uU"
            value = int(text[:-1] if unsigned else text)
        if unsigned:
            if value > UINT64_MAX:
                self.fail(f"uint literal out of range: {text}", pos)
            return _Token("uint", text, value, pos), end
        return _Token("int", text, value, pos), end

    def string(self, start: int, quote: int, *, raw: bool) -> tuple[_Token, int]:
        """Lex the string literal whose prefix starts at ``start`` and quote at ``quote``."""
        source, n = self.source, len(self.source)
        char = source[quote]
        delimiter = char * 3 if source.startswith(char * 3, quote) else char
        i = quote + len(delimiter)
        chars: list[str] = []
        while True:
            if i >= n:
                self.fail("unterminated string literal", start)
            if source.startswith(delimiter, i):
                i += len(delimiter)
                break
            c = source[i]
            if c in "\r\n" and len(delimiter) == 1:
                self.fail("unterminated string literal", start)
            if c == "\\" and not raw:
                decoded, i = self.escape(i)
                chars.append(decoded)
            else:
                chars.append(c)
                i += 1
        return _Token("string", source[start:i], "".join(chars), start), i

    def escape(self, pos: int) -> tuple[str, int]:
        """Decode the escape sequence at ``pos`` (a backslash); return it and where it ends."""
        source = self.source
        kind = source[pos + 1 : pos + 2]
        if kind in _ESCAPES:
            return _ESCAPES[kind], pos + 2
        digits = {"x": 2, "X": 2, "u": 4, "U": 8}.get(kind)
        if digits is not None:
            text = source[pos + 2 : pos + 2 + digits]
            if len(text) < digits or not set(text) <= _HEX:
                self.fail(f"invalid escape sequence: \\{kind} needs {digits} hex digits", pos)
            code = int(text, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                self.fail(f"invalid code point in escape sequence: \\{kind}{text}", pos)
            return chr(code), pos + 2 + digits
        if kind in "0123" and kind:
            text = source[pos + 1 : pos + 4]
            if len(text) == 3 and set(text[1:]) <= set("01234567"):
                return chr(int(text, 8)), pos + 4
            self.fail("invalid escape sequence: an octal escape needs 3 digits", pos)
        if not kind:
            self.fail("invalid escape sequence at the end of the expression", pos)
        shown = kind if kind.isprintable() else repr(kind)[1:-1]
        self.fail(f"invalid escape sequence '\\{shown}'", pos)


# --------------------------------------------------------------------------- parse tree
