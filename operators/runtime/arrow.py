"""The Arrow memory pool the engine's columns are allocated from.

pyarrow's default pool on Linux is mimalloc. Measured on the columnar W1 pipeline
(``bench/cluster.py``'s CW1, 10 M records in batches of 100,000 on one worker), every
batch's fresh buffers made the kernel zero new pages (``clear_page_erms`` was a quarter of the
profile): 460 ms of CPU in the timed region, 270 ms of it system time, against about 200 ms
(40 ms system) with jemalloc or the system allocator, which keep freed memory for the next
batch. :func:`use_engine_pool` switches the default pool to jemalloc (the system allocator
where a build has none) the first time the engine makes columns, unless the user chose a pool
with ``ARROW_DEFAULT_MEMORY_POOL``, which pyarrow then honours.
"""

from __future__ import annotations

import os

_CHOSEN: list[bool] = []


def use_engine_pool() -> None:
    """Make jemalloc (or the system allocator) pyarrow's default pool, once per process."""
    if _CHOSEN:
        return
    _CHOSEN.append(True)
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return  # the user's choice
    import pyarrow as pa

    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        pool = pa.system_memory_pool()
    pa.set_memory_pool(pool)
