"""The addresses of ``frontier serve``'s cluster flags (``--peers``, ``--apis``): ``host:port``.

Each is checked before anything starts; a wrong one is refused naming it (exit 2).
"""

from __future__ import annotations

import re

import click

_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\]")
"""A host as ``host:port`` has it: a name, an IPv4 address, or an IPv6 one in brackets."""


def addresses(text: str | list[str], what: str) -> list[tuple[str, int]]:
    """The ``host:port`` addresses of ``--peers`` or ``--apis``; a wrong one is named.

    >>> addresses("a:1, 10.0.0.2:8081,[::1]:9", "--peers")
    [('a', 1), ('10.0.0.2', 8081), ('[::1]', 9)]
    >>> addresses("http://a:1", "--apis")
    Traceback (most recent call last):
    click.exceptions.BadParameter: 'http://a:1' is not host:port (no scheme or path: a:1)
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    found = []
    for item in (i.strip() for i in items if i.strip()):
        if "://" in item or "/" in item:
            bare = item.partition("://")[2] or item
            raise click.BadParameter(
                f"{item!r} is not host:port (no scheme or path: {bare.partition('/')[0]})",
                param_hint=what,
            )
        host, _, port = item.rpartition(":")
        if not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(f"{item!r} is not host:port", param_hint=what)
        found.append((host, int(port)))
    return found
