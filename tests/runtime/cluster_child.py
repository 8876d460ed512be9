"""One process of a test cluster: ``python -m tests.runtime.cluster_child SCENARIO ...``.

Forms the cluster (``operators.runtime.cluster.connect``), runs the scenario of
:mod:`tests.runtime.cluster_scenarios` on this process's workers, and prints their results
as one JSON line ``{"workers": [global indexes], "results": [...]}``. A cluster error (a
hello that does not match, a peer lost) is printed as ``frontier: <error>`` on stderr, with
exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys

import uvloop

from operators import execute
from operators.runtime.cluster import ClusterError, ClusterSpec, connect, parse_peers
from tests.runtime.cluster_scenarios import SCENARIOS


async def main(args: argparse.Namespace) -> int:
    spec = ClusterSpec(
        processes=args.processes,
        index=args.index,
        workers=args.workers,
        peers=parse_peers(args.peers),
        secret=args.secret.encode(),
        startup_timeout=args.startup_timeout,
    )
    try:
        fabric = await connect(spec)
        results = await execute(SCENARIOS[args.scenario], spec.workers, fabric)
        await fabric.close()
    except ClusterError as error:
        print(f"frontier: {error}", file=sys.stderr, flush=True)
        return 1
    print(json.dumps({"workers": list(fabric.local), "results": results}), flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--peers", required=True)
    parser.add_argument("--secret", default="s3cret")
    parser.add_argument("--startup-timeout", type=float, default=20.0)
    sys.exit(uvloop.run(main(parser.parse_args())))
