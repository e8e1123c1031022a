"""The dashboard's HTTP side: a Starlette app served by uvicorn as a task in the cluster's own event
loop (so a button calls the cluster directly and the page reads the live model, no threads).

    GET  /                              the page, its words in the hub's language (grouplab/ui/texts.py)
    GET  /api/texts                     those words: {"lang", "texts"} (the catalogue's ui.page.* templates)
    GET  /api/state                     the model's snapshot (docs/ui.md §4)
    GET  /api/stream                    server-sent events: `state` twice a second, `timeline` entries
    GET  /api/messages/{id}             a timeline entry's raw request and response (or event)
    POST /api/members/{name}/{action}   kill, hang, slow, resume, partition {seconds}, assignor {assignors}
    POST /api/members                   add a member {assignors?}
    POST /api/topics/{topic}/partitions raise the partition count {partitions}
    POST /api/coordinator/restart       stop the coordinator and start it again on its port

Every POST answers {"ok": bool, "message": str}: 200, 400 for a request it refuses, 500 (one line,
no traceback) for a defect.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import socket
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from grouplab.teach.catalog import Catalog
from grouplab.ui.controls import ActionError, Controls
from grouplab.ui.hub import Hub
from grouplab.ui.texts import page_texts, render_page

STATIC = Path(__file__).parent / "static"
_log = logging.getLogger("grouplab.ui")


async def _params(request: Request, c: Catalog) -> dict[str, Any]:
    """A POST's JSON object (an empty body is {}); anything else is refused."""
    body = await request.body()
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ActionError(c.t("ui.answer.not_json")) from None
    if not isinstance(value, dict):
        raise ActionError(c.t("ui.answer.not_object"))
    return value


async def _answer(do: Callable[[], Awaitable[str]], c: Catalog) -> JSONResponse:
    try:
        return JSONResponse({"ok": True, "message": await do()})
    except ActionError as exc:
        return JSONResponse({"ok": False, "message": str(exc)}, status_code=400)
    except Exception as exc:  # a defect: one line for the page, the traceback to the log
        _log.exception("dashboard action failed")
        return JSONResponse({"ok": False, "message": c.t("ui.answer.internal", error=repr(exc))}, status_code=500)


def create_app(hub: Hub, controls: Controls | None) -> Starlette:
    """The app, speaking the hub's language; without `controls` (a recorded run, a test of the read
    side) the POSTs answer 400."""
    c = Catalog(hub.lang)

    def need() -> Controls:
        if controls is None:
            raise ActionError(c.t("ui.answer.no_cluster"))
        return controls

    async def index(request: Request) -> Response:
        page = render_page((STATIC / "index.html").read_text(encoding="utf-8"), hub.lang)
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    async def texts(request: Request) -> Response:
        return JSONResponse({"lang": hub.lang, "texts": page_texts(hub.lang)})

    async def state(request: Request) -> Response:
        return JSONResponse(hub.state())

    async def stream(request: Request) -> Response:
        return StreamingResponse(hub.stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def message(request: Request) -> Response:
        try:
            entry_id = int(request.path_params["entry"])
        except ValueError:
            return JSONResponse({"ok": False, "message": c.t("ui.answer.message_id")}, status_code=400)
        raw = hub.timeline.raw(entry_id)
        if raw is None:
            return JSONResponse({"ok": False, "message": c.t("ui.answer.no_message", id=entry_id)}, status_code=404)
        return JSONResponse(raw)

    async def member(request: Request) -> Response:
        name, action = request.path_params["name"], request.path_params["action"]
        return await _answer(lambda: _member(need(), name, action, request, c), c)

    async def add_member(request: Request) -> Response:
        async def do() -> str:
            return await need().add_member(await _params(request, c))
        return await _answer(do, c)

    async def partitions(request: Request) -> Response:
        async def do() -> str:
            return await need().add_partitions(request.path_params["topic"], await _params(request, c))
        return await _answer(do, c)

    async def restart(request: Request) -> Response:
        return await _answer(lambda: need().restart_coordinator(), c)

    async def broker(request: Request) -> Response:
        return await _answer(lambda: need().broker(request.path_params["node"], request.path_params["action"]), c)

    return Starlette(routes=[
        Route("/", index),
        Route("/api/texts", texts),
        Route("/api/state", state),
        Route("/api/stream", stream),
        Route("/api/messages/{entry}", message),
        Route("/api/members/{name}/{action}", member, methods=["POST"]),
        Route("/api/members", add_member, methods=["POST"]),
        Route("/api/topics/{topic}/partitions", partitions, methods=["POST"]),
        Route("/api/coordinator/restart", restart, methods=["POST"]),
        Route("/api/brokers/{node}/{action}", broker, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])


async def _member(controls: Controls, name: str, action: str, request: Request, c: Catalog) -> str:
    return await controls.member(name, action, await _params(request, c))


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: Ctrl-C belongs to the grouplab command (exit 130)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class UiServer:
    """The dashboard on HOST:PORT, a task in the running loop. `start` binds first, so a port in use
    is an OSError at once (the CLI makes it one line), and port 0 gives a free port (`.port`)."""

    def __init__(self, hub: Hub, controls: Controls | None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.hub = hub
        self.host = host
        self.port = port
        self.app = create_app(hub, controls)
        self._server: _Server | None = None
        self._task: asyncio.Task | None = None
        self._sock: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    async def start(self) -> "UiServer":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, lifespan="off", log_level="warning", access_log=False,
                                timeout_graceful_shutdown=2)
        self._server = _Server(config)
        self._task = asyncio.ensure_future(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise OSError(errno.EADDRNOTAVAIL, "the dashboard's server stopped at once")
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        self.hub.close()  # the event streams end, so the server need not wait for them
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5)
            except asyncio.TimeoutError:
                self._task.cancel()
            except Exception:  # pragma: no cover - a failure while stopping changes nothing now
                _log.exception("dashboard server stopped with an error")
        self._server = self._task = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
