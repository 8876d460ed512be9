"""Creating a large graph: a chain of N ``map`` nodes, checked, compiled and built.

The submission path a client's ``POST /v1/dataflows`` takes, without HTTP: the graph model
at the edge (structure and each node's parameter model), the compiler (expressions compiled
once each), and the build on every worker (the scopes' trackers and their summaries).
Prints the median of ``--repeats`` creations, split into checking + compiling and building.

    .venv/bin/python bench/graph_create.py --nodes 1000 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

# The checkout this script is in, not bench/service.py: the script's folder is first on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.graph_model import graph_spec
from service.app import DataflowManager, Settings


def chain(nodes: int) -> dict[str, Any]:
    """``input -> map x (nodes - 2) -> output``, each map with its own expression."""
    maps = [f"m{i}" for i in range(nodes - 2)]
    graph: dict[str, Any] = {"in": {"op": "input"}}
    graph.update({name: {"op": "map", "expr": f"r + {i}"} for i, name in enumerate(maps)})
    graph["out"] = {"op": "output"}
    order = ["in", *maps, "out"]
    return {"nodes": graph, "edges": [list(pair) for pair in pairwise(order)]}


async def once(manager: DataflowManager, document: dict[str, Any]) -> tuple[float, float]:
    began = time.perf_counter()
    spec = graph_spec(document)
    manager.compile(spec)
    checked = time.perf_counter()
    record = await manager.create("bench", spec)
    created = time.perf_counter()
    await manager.drop("bench", record.id)
    # create() compiles again: the build alone is the creation less one compile.
    return checked - began, (created - checked) - (checked - began)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    manager = DataflowManager(Settings(workers=args.workers))
    await manager.start()
    document = chain(args.nodes)
    runs = [await once(manager, document) for _ in range(args.repeats)]
    check = statistics.median(r[0] for r in runs)
    build = statistics.median(r[1] for r in runs)
    print(
        f"{args.nodes} nodes, {args.workers} worker(s): check + compile {check * 1e3:.0f} ms, "
        f"build {build * 1e3:.0f} ms, total {(check + build) * 1e3:.0f} ms (median of "
        f"{args.repeats})"
    )


if __name__ == "__main__":
    asyncio.run(main())
