"""KafkaRequestHandlerPool: ``num.io.threads`` threads that take requests off the RequestChannel
and run the dispatcher (KafkaApis.handle) on them.  Built and started by server.py, beside the
SocketServer whose RequestChannel it serves (as Kafka's BrokerServer wires them)."""

from __future__ import annotations

import threading

from samsa.broker.request_channel import Dispatcher, RequestChannel, handler_failed

__all__ = ["RequestHandlerPool"]


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
        state = channel.handler_state
        state.in_pool = True
        while True:
            # A request kept for this thread by RequestChannel.run_next_on_this_thread first.
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
