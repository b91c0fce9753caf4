"""The server's own start-up line: where it listens, logged once, when it is ready.

uvicorn logs its start in every process that runs the app (``Started server process [pid]``
and the lifespan lines). With planning workers those processes are the workers: the lines
come N times, with PIDs that are not the server's, and as each worker is handed the socket
the server opened, uvicorn never says where it listens. So `factorspec serve` logs
``FactorSpec serving <model> on http://host:port`` once, from the process you started, when
the server accepts requests:

- `serving_line`: that line;
- `log_config`: uvicorn's logging configuration, with the ``factorspec`` loggers printed by
  its handler (the line, the server's warnings and errors);
- `ReadyServer`: a `uvicorn.Server` that calls back once it listens;
- `quiet_worker`: a planning worker's uvicorn logs warnings and errors (and its access log),
  not its start and stop.
"""

from __future__ import annotations

import copy
import logging
import socket
from collections.abc import Callable
from typing import Any

import uvicorn  # noqa: TID253 - the server package is imported on demand
from uvicorn.config import LOGGING_CONFIG  # noqa: TID253

__all__ = ["ReadyServer", "log_config", "quiet_worker", "serving_line"]

log = logging.getLogger("factorspec.server")


def serving_line(model: str, host: str, port: int) -> str:
    """``FactorSpec serving <model> on http://host:port`` (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"FactorSpec serving {model} on http://{shown}:{port}"


def log_config(level: str) -> dict[str, Any]:
    """Uvicorn's logging configuration plus the ``factorspec`` loggers at ``level``."""
    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["factorspec"] = {
        "handlers": ["default"],
        "level": level.upper(),
        "propagate": False,
    }
    return config


def quiet_worker() -> None:
    """Keep this process's uvicorn to warnings and errors (call after `uvicorn.Config`).

    The access log stays; the start and stop lines (``Started server process``, the
    lifespan) are the server's to log, once.
    """
    error_log = logging.getLogger("uvicorn.error")
    error_log.setLevel(max(logging.WARNING, error_log.getEffectiveLevel()))


class ReadyServer(uvicorn.Server):
    """A `uvicorn.Server` that calls ``on_ready`` once it listens.

    Args:
        config: the server's configuration.
        on_ready: called in the server's event loop once its sockets accept connections.
    """

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Uvicorn's start-up, then ``on_ready`` (unless start-up failed)."""
        await super().startup(sockets=sockets)
        if self.started:
            self.on_ready()
