"""Regular expressions: RE2, linear in the string (CEL specifies RE2's syntax and semantics)."""

from __future__ import annotations

import functools
from typing import Any, Final

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from operators.graph.cel.core import EvaluationError
from operators.graph.cel.steps import _charge
from operators.graph.cel.types import _type_name

_REGEX_COST_DIVISOR: Final = 4
"""A search costs its string's bytes times its pattern's RE2 program size, divided by this: in
the worst case (a pattern whose DFA does not fit, searched with the NFA) RE2 takes about 10 ns
per byte and instruction, about a quarter of a step."""

_REGEX_MEMORY: Final = 2 << 20
"""RE2's memory budget per pattern (its program and DFA caches; past it, the slower NFA)."""

_REGEX_CACHE_SIZE: Final = 256
_REGEX_CACHED_LENGTH: Final = 4096
"""Patterns longer than this (only patterns read from records can be) are not kept."""

_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False  # an invalid pattern is reported to the client, not to stderr
_RE2_OPTIONS.never_capture = True  # matches() needs no groups: RE2 then needs no submatch engine
_RE2_OPTIONS.max_mem = _REGEX_MEMORY
_UNANCHORED: Final = re2._re2.RE2.Anchor.UNANCHORED


_MEMO_SIZE: Final = 256
_MEMO_LENGTH: Final = 64
"""A pattern keeps its answers on the first ``_MEMO_SIZE`` strings of at most ``_MEMO_LENGTH``
characters it searches: a call of the RE2 binding costs about a microsecond (five times a search
with Python's ``re``), a dict look-up a twentieth of that, and filters often test a field of
few values."""


class _Regex:
    """A pattern for ``matches``, compiled by RE2, with the answers it has given on short strings.

    The binding's own ``re2.compile`` would keep every pattern in a cache of its own (up to 128
    of up to 8 MiB each) and build a match object per search; the compiled RE2 object is called
    directly instead.
    """

    __slots__ = ("memo", "program", "regexp")

    def __init__(self, regexp: Any) -> None:
        self.regexp = regexp
        self.program = max(1, int(regexp.ProgramSize()))
        """The size of its RE2 program, which bounds its work per byte (see _REGEX_COST_DIVISOR)."""
        self.memo: dict[str, tuple[bool, int]] = {}
        """Answers on short strings: whether found, and the string's size in bytes."""

    def search(self, text: object, limit: int, steps: list[int] | None = None) -> bool:
        """Whether the pattern is in ``text``, paid for before searching.

        Into the record's counter ``steps`` if given, else the search may cost at most
        ``limit`` steps.

        Raises:
            EvaluationError: ``text`` is not a string (or not valid Unicode), or searching it
                would take more steps than there are.
        """
        if type(text) is not str:
            raise EvaluationError(f"no such overload: {_type_name(text)}.matches(string)")
        assert isinstance(text, str)
        known = self.memo.get(text)
        if known is not None:
            found, size = known
        else:
            try:
                data = text.encode()
            except UnicodeEncodeError:
                raise EvaluationError("matches() on a string that is not valid Unicode") from None
            size = len(data)
            found = None
        cost = size * self.program // _REGEX_COST_DIVISOR
        if steps is not None:  # before searching, so that the search is never too long
            _charge(steps, cost)
        elif cost > limit:
            raise EvaluationError(
                f"matches() would take more than the step limit ({limit:,}): a string of"
                f" {size:,} bytes against a pattern of {self.program:,} RE2 instructions"
            )
        if found is None:
            found = bool(self.regexp.Match(_UNANCHORED, data, 0, size)[0][0] >= 0)
            if len(text) <= _MEMO_LENGTH and len(self.memo) < _MEMO_SIZE:
                self.memo[text] = (found, size)
        return found


def _regex(pattern: str) -> _Regex | str:
    """RE2's compiled ``pattern``, or why it does not compile."""
    try:
        data = pattern.encode()
    except UnicodeEncodeError:
        return "the pattern is not valid Unicode"
    regexp = re2._re2.RE2(data, _RE2_OPTIONS)
    if not regexp.ok():
        message = regexp.error()
        return message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    return _Regex(regexp)


@functools.lru_cache(maxsize=_REGEX_CACHE_SIZE)
def _cached_pattern(pattern: str) -> _Regex | str:
    return _regex(pattern)


def _cached_regex(pattern: str) -> _Regex | str:
    """:func:`_regex`, through a bounded cache (which keeps what does not compile, too)."""
    if len(pattern) > _REGEX_CACHED_LENGTH:
        return _regex(pattern)
    return _cached_pattern(pattern)


def _search(regex: _Regex, limit: int, text: object) -> bool:
    """``text.matches(<literal pattern>)``, if it costs at most ``limit`` steps."""
    return regex.search(text, limit)


def _search_counted(steps: list[int], regex: _Regex, text: object) -> bool:
    """``text.matches(<literal pattern>)`` in a comprehension: paid for before it runs."""
    return regex.search(text, steps[1], steps)


def _dynamic_regex(pattern: object) -> _Regex:
    if type(pattern) is not str:
        raise EvaluationError(f"no such overload: string.matches({_type_name(pattern)})")
    assert isinstance(pattern, str)
    compiled = _cached_regex(pattern)
    if isinstance(compiled, str):
        raise EvaluationError(f"invalid regular expression: {compiled}")
    return compiled


def _search_dynamic(text: object, pattern: object, limit: int) -> bool:
    """``text.matches(pattern)`` with a pattern known only now, compiled (and cached) now."""
    if type(text) is not str:  # the receiver's error first, as with a literal pattern
        raise EvaluationError(f"no such overload: {_type_name(text)}.matches(string)")
    return _dynamic_regex(pattern).search(text, limit)


def _search_dynamic_counted(steps: list[int], text: object, pattern: object) -> bool:
    """:func:`_search_dynamic` in a comprehension: paid for before it runs."""
    if type(text) is not str:
        raise EvaluationError(f"no such overload: {_type_name(text)}.matches(string)")
    return _dynamic_regex(pattern).search(text, steps[1], steps)
