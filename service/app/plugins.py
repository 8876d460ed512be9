"""Operators of the deployer's own, registered when the service starts."""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any

from operators.graph import register_operator


def load_operator_plugins(modules: tuple[str, ...]) -> list[str]:
    """Let deployer code register its operators; returns what was loaded.

    Each module in ``modules``, and each ``frontier.operators`` entry point, provides
    ``register_operators(register)`` and calls ``register(OpKind(...))`` for every operator.
    Only the server's own configuration reaches here: API clients cannot add operators.
    """
    loaded: list[str] = []
    hooks: list[tuple[str, Any]] = [
        (name, importlib.import_module(name).register_operators) for name in modules
    ]
    hooks.extend(
        (entry.value, entry.load()) for entry in metadata.entry_points(group="frontier.operators")
    )
    for name, hook in hooks:
        if name in _LOADED_PLUGINS:
            continue
        hook(register_operator)
        _LOADED_PLUGINS.add(name)
        loaded.append(name)
    return loaded


_LOADED_PLUGINS: set[str] = set()
