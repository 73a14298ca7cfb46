"""KafkaRequestHandlerPool: ``num.io.threads`` threads that take requests off the RequestChannel
and run the dispatcher (KafkaApis.handle) on them."""

from __future__ import annotations

import logging
import threading

from samsa.broker.request_channel import Dispatcher, RequestChannel, RequestContext

__all__ = ["RequestHandlerPool"]

log = logging.getLogger("samsa.broker.handler")


class RequestHandlerPool:
    def __init__(self, channel: RequestChannel, dispatcher: Dispatcher, num_threads: int,
                 node_id: int = 0) -> None:
        self._channel = channel
        self._dispatcher = dispatcher
        self._threads = [
            threading.Thread(target=self._run, name=f"samsa-request-handler-{node_id}-{i}",
                             daemon=True)
            for i in range(num_threads)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        channel = self._channel
        dispatcher = self._dispatcher
        while True:
            ctx = channel.get()
            if ctx is None:
                return
            try:
                dispatcher(ctx)
            except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the thread
                self._handler_failed(ctx, exc)

    @staticmethod
    def _handler_failed(ctx: RequestContext, exc: Exception) -> None:
        log.error("error handling %r from %s; closing the connection", ctx, ctx.client_host,
                  exc_info=exc)
        if not ctx.completed:
            try:
                ctx.close_connection(f"handler error: {exc!r}")
            except Exception:
                log.exception("closing %s after a handler error failed", ctx.connection_id)

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop every thread once the requests ahead of the stop markers are handled."""
        for thread in self._threads:
            if thread.is_alive():
                self._channel.put(None)
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout)
