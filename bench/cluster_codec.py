"""Benchmark of the cluster's frame codec: pickle protocol 5 beside orjson and msgpack.

Run by hand. A frame is a list of ``(channel, worker, message)``: data messages
``(time, records)`` and progress broadcasts ``(sender, [((location, time), diff), ...])``.
Each codec encodes and decodes the same frames; orjson and msgpack cannot carry a
``Product`` time or a tuple as such, so for them times and tuples are converted to lists on
the way out and back on the way in (the work a real codec on them would add), and the
round trip is checked equal. Reported: MB/s of encoded bytes and records per second for
encode + decode, and the encoded size, per workload. msgpack is not a dependency of
Frontier: ``pip install msgpack`` to include it.

    .venv/bin/python bench/cluster_codec.py
"""

from __future__ import annotations

import pickle
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from operators.progress import Product

try:
    import msgpack
except ImportError:  # optional
    msgpack = None


def workloads() -> dict[str, list[Any]]:
    ints = [(3, 1, (t, list(range(t * 1000, t * 1000 + 1000)))) for t in range(10)]
    words = [(3, 1, (t, [f"word{i % 997}" for i in range(1000)])) for t in range(10)]
    dicts = [
        (3, 1, (t, [{"k": i % 100, "v": i, "s": "x" * 8} for i in range(1000)])) for t in range(10)
    ]
    products = [(5, 0, (Product(t, 2), [(i, i * 2) for i in range(1000)])) for t in range(10)]
    progress = [
        (7, -1, (1, [((i, 0, 1), Product(t, i % 5), 1 if i % 2 else -1) for i in range(50)]))
        for t in range(200)
    ]
    return {
        "int records": ints,
        "str records": words,
        "dict records": dicts,
        "product times, pairs": products,
        "progress batches": progress,
    }


def to_plain(value: Any) -> Any:
    if isinstance(value, Product):
        return {"p": [to_plain(value.outer), to_plain(value.inner)]}
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def from_plain(value: Any, tuples: bool = True) -> Any:
    if isinstance(value, dict):
        if set(value) == {"p"}:
            outer, inner = value["p"]
            return Product(from_plain(outer), from_plain(inner))
        return {k: from_plain(v, False) for k, v in value.items()}
    if isinstance(value, list):
        items = [from_plain(v) for v in value]
        return tuple(items) if tuples else items
    return value


def codecs() -> dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]]:
    found: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]] = {
        "pickle 5": (lambda f: pickle.dumps(f, protocol=5), pickle.loads),
        "orjson (+ conversion)": (
            lambda f: orjson.dumps(to_plain(f)),
            lambda b: from_plain(orjson.loads(b)),
        ),
    }
    if msgpack is not None:
        found["msgpack (+ conversion)"] = (
            lambda f: msgpack.packb(to_plain(f)),
            lambda b: from_plain(msgpack.unpackb(b)),
        )
    return found


def measure(
    frame: list[Any], encode: Callable[[Any], bytes], decode: Callable[[bytes], Any]
) -> tuple[float, int]:
    runs = []
    size = len(encode(frame))
    for _ in range(7):
        began = time.perf_counter()
        for _ in range(20):
            decode(encode(frame))
        runs.append((time.perf_counter() - began) / 20)
    return statistics.median(runs), size


def main() -> None:
    rows = []
    for name, frame in workloads().items():
        records = sum(len(m[1]) for _, _, m in frame)  # records, or progress changes
        for codec, (encode, decode) in codecs().items():
            back = decode(encode(frame))
            exact = back == frame or to_plain(back) == to_plain(frame)
            seconds, size = measure(frame, encode, decode)
            rows.append(
                [
                    name,
                    codec,
                    f"{size / 1024:.0f}",
                    f"{size / seconds / 1e6:.0f}",
                    f"{records / seconds / 1e6:.2f}",
                    "yes" if exact else "NO",
                ]
            )
    print("encode + decode of one frame, median of 7 x 20")
    print(table(["workload", "codec", "KiB", "MB/s", "M items/s", "round trip"], rows))


if __name__ == "__main__":
    main()
