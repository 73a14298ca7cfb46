"""KafkaRequestHandlerPool: ``num.io.threads`` threads that take requests off the RequestChannel
and run the dispatcher (KafkaApis.handle) on them."""

from __future__ import annotations

import logging
import threading

from samsa.broker.request_channel import Dispatcher, RequestChannel, RequestContext

__all__ = ["RequestHandlerPool", "handler_failed", "run_next_on_this_thread"]

log = logging.getLogger("samsa.broker.handler")


class _ThreadState(threading.local):
    in_pool = False
    next: RequestContext | None = None


_state = _ThreadState()


def run_next_on_this_thread(ctx: RequestContext) -> bool:
    """Called on a handler thread that just finished a request whose connection has another
    one waiting: keep it on this thread, to run when the current dispatch returns, instead of
    a round trip through the queue and a wakeup of another thread.  False when not on a handler
    thread (or one continuation is already held); the caller queues it then."""
    state = _state
    if not state.in_pool or state.next is not None:
        return False
    state.next = ctx
    return True


def handler_failed(ctx: RequestContext, exc: Exception) -> None:
    """A dispatcher raised: log it and close the connection (unless the request was answered)."""
    log.error("error handling %r from %s; closing the connection", ctx, ctx.client_host,
              exc_info=exc)
    if not ctx.completed:
        try:
            ctx.close_connection(f"handler error: {exc!r}")
        except Exception:
            log.exception("closing %s after a handler error failed", ctx.connection_id)


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
        state = _state
        state.in_pool = True
        while True:
            ctx = state.next
            if ctx is None:
                ctx = channel.get()
                if ctx is None:
                    return
            else:
                state.next = None
            try:
                dispatcher(ctx)
            except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the thread
                handler_failed(ctx, exc)

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop every thread once the requests ahead of the stop markers are handled."""
        for thread in self._threads:
            if thread.is_alive():
                self._channel.put(None)
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout)
