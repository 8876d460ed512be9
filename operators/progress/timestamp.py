"""Timestamps and path summaries: partially ordered logical times.

Two kinds of time are built in:

* **Integers** ``0 <= t < 2**64`` (the root scope's time). Their path summaries are plain
  non-negative ints meaning "add k". Python ints are used directly, not wrapped, because
  they are the hot case and a wrapper would cost a call per comparison.
* **Products** ``Product(outer, inner)`` (the time of a nested iterative scope), ordered by
  the *product* partial order: both coordinates ``<=``. A summary of product times is itself a
  ``Product`` of summaries, applied coordinate-wise. Products nest to any depth.

The module-level functions :func:`less_equal`, :func:`less_than`, :func:`results_in` and
:func:`followed_by` work on either kind, and are what the rest of the engine calls.

Python's ``<`` on a ``Product`` is the lexicographic tuple order. It is the *sort order*
(a total order that extends the partial order: ``a.less_equal(b)`` implies ``a <= b``), used
to process times in a canonical order. It is never the partial order: use
:func:`less_equal` / :func:`less_than` for that.

>>> less_equal(Product(1, 2), Product(2, 1))
False
>>> Product(1, 2) < Product(2, 1)  # sort order only
True
>>> results_in(Product(0, 1), Product(5, 3))
Product(outer=5, inner=4)
>>> results_in(1, MAX_TIME) is None
True
"""

from __future__ import annotations

from typing import Generic, NamedTuple, Protocol, TypeVar, cast

MAX_TIME = 2**64 - 1
"""The largest integer time; a summary that would pass it yields no time at all."""

O = TypeVar("O")  # noqa: E741 - the paper's name for the outer coordinate.
I = TypeVar("I")  # noqa: E741 - the paper's name for the inner coordinate.


class Timestamp(Protocol):
    """A logical time with a partial order (the protocol ``Product`` implements).

    Integers are timestamps too; they are handled by the module functions rather than by
    methods, so they do not appear as implementers of this protocol.

    Laws, for all timestamps ``a``, ``b``, ``c`` of one domain:

    * ``a.less_equal(a)`` (reflexive); ``a.less_equal(b) and b.less_equal(a)`` implies
      ``a == b`` (antisymmetric); ``less_equal`` is transitive.
    * ``a.less_equal(b)`` implies ``a <= b``: Python's ``<`` is a total order that extends
      the partial order; it is used only to sort.
    * There is a minimum (``0``, or a ``Product`` of minima) that is ``less_equal`` to all.
    * Equal timestamps hash equally.
    """

    def less_equal(self, other: object) -> bool:
        """Whether ``self`` is at most ``other`` in the partial order."""
        ...

    def less_than(self, other: object) -> bool:
        """Whether ``self`` is strictly below ``other``: ``less_equal`` and not equal."""
        ...


class PathSummary(Protocol):
    """How a timestamp must advance along a path (the protocol ``Product`` implements).

    Integers ``k >= 0`` are summaries too ("add k"), handled by the module functions.

    Laws, for summaries ``s``, ``s2`` and times ``t``, ``u``:

    * ``results_in(t)`` never moves time backwards: when it is not ``None``,
      ``t.less_equal(s.results_in(t))``. ``None`` means the path cannot be taken (overflow).
    * Monotone: ``t.less_equal(u)`` implies ``s.results_in(t) <= s.results_in(u)``
      (in the partial order, where both exist).
    * ``s.followed_by(s2).results_in(t) == s2.results_in(s.results_in(t))`` whenever the
      right-hand side exists; ``followed_by`` is ``None`` when no time survives both.
    * Summaries are partially ordered by ``less_equal``: a smaller summary advances less.
    * The identity (``0``, or a ``Product`` of identities) leaves every time unchanged.
    """

    def results_in(self, time: object) -> object | None:
        """The time a record at ``time`` has after the path, or ``None`` if it cannot."""
        ...

    def followed_by(self, other: object) -> object | None:
        """The summary of this path followed by ``other``, or ``None`` if none survives."""
        ...

    def less_equal(self, other: object) -> bool:
        """Whether this summary advances times at most as much as ``other``."""
        ...


def less_equal(a: object, b: object) -> bool:
    """Partial order on timestamps (and on summaries): whether ``a`` is at most ``b``.

    >>> less_equal(3, 5), less_equal(Product(0, 4), Product(1, 3))
    (True, False)
    """
    if type(a) is int:
        return a <= cast(int, b)
    return cast(Timestamp, a).less_equal(b)


def less_than(a: object, b: object) -> bool:
    """Strict partial order: ``less_equal(a, b)`` and ``a != b``.

    >>> less_than(Product(1, 1), Product(1, 2)), less_than(Product(1, 1), Product(1, 1))
    (True, False)
    """
    if type(a) is int:
        return a < cast(int, b)
    return a != b and cast(Timestamp, a).less_equal(b)


def results_in(summary: object, time: object) -> object | None:
    """Apply a path summary to a time; ``None`` when the result would overflow.

    >>> results_in(5, 3), results_in(2, MAX_TIME - 1)
    (8, None)
    """
    if type(time) is int:
        result = time + cast(int, summary)
        return result if result <= MAX_TIME else None
    return cast(PathSummary, summary).results_in(time)


def followed_by(first: object, second: object) -> object | None:
    """Compose two summaries: ``first`` then ``second``; ``None`` if nothing survives both.

    >>> followed_by(2, 3), followed_by(Product(1, 0), Product(0, 1))
    (5, Product(outer=1, inner=1))
    """
    if type(first) is int:
        result = first + cast(int, second)
        return result if result <= MAX_TIME else None
    return cast(PathSummary, first).followed_by(second)


def is_identity(summary: object) -> bool:
    """Whether a summary leaves every time unchanged (``0`` or a product of identities).

    A summary that is not the identity strictly advances every time it applies to, because
    summaries never move time backwards and every coordinate is a non-negative "add k".

    >>> is_identity(0), is_identity(Product(0, 0)), is_identity(Product(0, 1))
    (True, True, False)
    """
    if type(summary) is int:
        return summary == 0
    if isinstance(summary, Product):
        return is_identity(summary.outer) and is_identity(summary.inner)
    raise TypeError(f"not a path summary: {summary!r}")


def minimum_like(time: object) -> object:
    """The minimum of the time domain ``time`` belongs to.

    >>> minimum_like(17), minimum_like(Product(3, Product(1, 2)))
    (0, Product(outer=0, inner=Product(outer=0, inner=0)))
    """
    if type(time) is int:
        return 0
    if isinstance(time, Product):
        return Product(minimum_like(time.outer), minimum_like(time.inner))
    raise TypeError(f"not a timestamp: {time!r}")


def same_domain(time: object, like: object) -> bool:
    """Whether ``time`` has the shape of ``like``: both ints, or products of the same shape.

    >>> same_domain(3, 0), same_domain(Product(1, 2), 0), same_domain(Product(1, 2), Product(0, 0))
    (True, False, True)
    """
    if type(like) is int:
        return type(time) is int
    if isinstance(like, Product) and isinstance(time, Product):
        return same_domain(time.outer, like.outer) and same_domain(time.inner, like.inner)
    return False


def identity_like(summary: object) -> object:
    """The identity summary of the domain ``summary`` belongs to (same shape as minimum)."""
    return minimum_like(summary)


def check_time(time: object) -> None:
    """Raise ``ValueError``/``TypeError`` unless ``time`` is a valid timestamp.

    Integers must lie in ``[0, 2**64)``; products are checked coordinate by coordinate.
    ``bool`` is refused although it is an ``int`` subclass: it is almost surely a mistake.

    >>> check_time(Product(1, 2**64))
    Traceback (most recent call last):
    ...
    ValueError: time 18446744073709551616 is outside [0, 2**64)
    """
    if type(time) is int:
        if not 0 <= time <= MAX_TIME:
            raise ValueError(f"time {time} is outside [0, 2**64)")
    elif isinstance(time, Product):
        check_time(time.outer)
        check_time(time.inner)
    else:
        raise TypeError(f"not a timestamp: {time!r} (expected an int or a Product)")


class Product(NamedTuple, Generic[O, I]):
    """A pair of times under the product partial order, or a pair of summaries.

    ``Product(a, b).less_equal(Product(c, d))`` iff ``a <= c`` and ``b <= d`` (each in its
    own partial order). As a summary, ``Product(s, r)`` advances the outer coordinate by
    ``s`` and the inner by ``r``. Products are hashable and equal by value.

    Being a ``NamedTuple`` makes hashing, equality and the lexicographic sort order fast
    (they run in C); the price is that a ``Product`` also equals the plain tuple with the
    same fields, which the engine never mixes with products.

    >>> Product(1, 5).less_equal(Product(2, 5)), Product(1, 5).less_equal(Product(2, 4))
    (True, False)
    >>> Product(1, 0).followed_by(Product(0, 2))
    Product(outer=1, inner=2)
    """

    outer: O
    inner: I

    def less_equal(self, other: object) -> bool:
        """Product order: both coordinates at most ``other``'s."""
        o = cast("Product[O, I]", other)
        return less_equal(self[0], o[0]) and less_equal(self[1], o[1])

    def less_than(self, other: object) -> bool:
        """Strict product order: ``less_equal`` and not equal."""
        return self != other and self.less_equal(other)

    def results_in(self, time: object) -> Product[O, I] | None:
        """Apply this product of summaries to a product time, coordinate-wise."""
        t = cast("Product[O, I]", time)
        outer = results_in(self[0], t[0])
        if outer is None:
            return None
        inner = results_in(self[1], t[1])
        if inner is None:
            return None
        return Product(cast(O, outer), cast(I, inner))

    def followed_by(self, other: object) -> Product[O, I] | None:
        """Compose coordinate-wise; ``None`` if either coordinate cannot compose."""
        s = cast("Product[O, I]", other)
        outer = followed_by(self[0], s[0])
        if outer is None:
            return None
        inner = followed_by(self[1], s[1])
        if inner is None:
            return None
        return Product(cast(O, outer), cast(I, inner))
