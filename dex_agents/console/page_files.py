"""The page's files: ``index.html`` with its security headers, and the style sheet and
JavaScript modules it loads, served by name from a list made once.

A request's name is only looked up in that list, never made into a path, so no
name reaches past the folder (``..``, a backslash on Windows, an encoded
``/``), and one no file system takes (past 255 bytes) is not found, where
looking it up on disk failed with "File name too long" and answered 500.
"""

from __future__ import annotations

from pathlib import Path

from starlette.responses import FileResponse, PlainTextResponse, Response

STATIC_DIR = Path(__file__).parent / "static"
"""The page's HTML, CSS and JavaScript, shipped inside the package."""

# Named here, not guessed from the platform's table: a browser runs a module script only when
# it is served as JavaScript, and on some machines that table maps .js to text/plain.
_STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
_STATIC_HEADERS = {
    # Revalidated on each load: a page that mixed modules of two versions would break.
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}

_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    # Without a token a page on any site could frame the loopback console and trick a
    # click on Approve (clickjacking): the page refuses to be framed at all. It runs, styles
    # and reaches only the console's own files and API, so markup that ever got into it could
    # run no script; its icon is an empty data: URL.
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def page_response() -> Response:
    """The page, ``index.html``, framed by no site and running only the console's own files."""
    return FileResponse(STATIC_DIR / "index.html", headers=_PAGE_HEADERS)


class StaticFiles:
    """The style sheet and JavaScript modules directly in ``STATIC_DIR``, listed when made."""

    def __init__(self) -> None:
        self._files = {
            path.name: path
            for path in STATIC_DIR.iterdir()
            if path.suffix in _STATIC_TYPES and path.is_file()
        }

    def response(self, name: str) -> Response:
        """The file named ``name`` with its type named, or 404 for a name not in the list."""
        path = self._files.get(name)
        if path is None:
            return PlainTextResponse("Not Found", status_code=404)
        return FileResponse(path, media_type=_STATIC_TYPES[path.suffix], headers=_STATIC_HEADERS)
