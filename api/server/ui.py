"""The dataflow page at ``/ui/``: static files, served from the package (``docs/ui.md``).

The page is plain JavaScript with two vendored libraries (elkjs, for the graph's layout, and
uPlot, for its charts); it needs no build step. Its files hold no data and are the same for
every tenant, so they are served without a token (a browser cannot send one when it opens an
address): everything the page shows it reads from the API with the token the user gives it,
as any client does.

Only the files in :data:`ASSETS` are served, by name; nothing else of the directory is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from hashlib import sha256
from pathlib import Path

from aiohttp import web

from service.app import NotFound

HERE = Path(__file__).parent / "ui"


@dataclass(frozen=True, slots=True)
class Asset:
    """A file of the page: where it is in the package and its content type."""

    path: str
    content_type: str


ASSETS = {
    "index.html": Asset("index.html", "text/html"),
    "app.js": Asset("app.js", "text/javascript"),
    "style.css": Asset("style.css", "text/css"),
    "elk.bundled.js": Asset("vendor/elkjs/elk.bundled.js", "text/javascript"),
    "elkjs-LICENSE.md": Asset("vendor/elkjs/LICENSE.md", "text/plain"),
    "uPlot.iife.min.js": Asset("vendor/uplot/uPlot.iife.min.js", "text/javascript"),
    "uPlot.min.css": Asset("vendor/uplot/uPlot.min.css", "text/css"),
    "uplot-LICENSE": Asset("vendor/uplot/LICENSE", "text/plain"),
    "vendor-README.md": Asset("vendor/README.md", "text/plain"),
}
"""The page's files by the name they are served under (``/ui/<name>``)."""

SECURITY_HEADERS = {
    # The page loads only its own files and talks only to this server.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@cache
def _load(name: str) -> tuple[bytes, str]:
    """A file's bytes and their ETag (read once: the package's files do not change)."""
    body = (HERE / ASSETS[name].path).read_bytes()
    return body, f'"{sha256(body).hexdigest()[:32]}"'


def _serve(request: web.Request, name: str) -> web.Response:
    asset = ASSETS.get(name)
    if asset is None:
        raise NotFound(f"the page has no file {name!r}")
    body, etag = _load(name)
    headers = {**SECURITY_HEADERS, "ETag": etag, "Cache-Control": "no-cache"}
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    charset = "utf-8" if asset.content_type.startswith("text/") else None
    return web.Response(
        body=body, content_type=asset.content_type, charset=charset, headers=headers
    )


async def page(request: web.Request) -> web.Response:
    """The page itself (``/ui/``)."""
    return _serve(request, "index.html")


async def asset(request: web.Request) -> web.Response:
    """One of the page's files (``/ui/{asset}``); 404 for any other name."""
    return _serve(request, request.match_info["asset"])
