"""FileSlice: a byte range of a segment file, handed to the network layer for zero-copy sends."""

from __future__ import annotations

import os

__all__ = ["FileHandle", "FileSlice"]


class FileHandle:
    """An open file descriptor shared by a segment and the slices read from it.

    A deleted segment (retention, DeleteRecords) only drops its reference; the descriptor is
    closed when the last FileSlice using it is gone, so a fetch response already being sent
    keeps working after its segment is unlinked.
    """

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()


class FileSlice:
    """``size`` bytes of a log file starting at ``position``: one or more whole record batches
    (the last may be cut short by max_bytes, as in Kafka; clients ignore a partial last batch).

    Send it with ``os.sendfile(sock.fileno(), slice.fileno(), slice.position, len(slice))`` (or
    ``socket.sendfile``), or get the bytes with ``read()``.  The slice keeps its file open until
    it is garbage collected.
    """

    __slots__ = ("_handle", "position", "size")

    def __init__(self, handle: FileHandle, position: int, size: int) -> None:
        self._handle = handle
        self.position = position
        self.size = size

    def fileno(self) -> int:
        if self._handle.fd < 0:
            raise ValueError(f"the log file {self._handle.path} was closed (broker shutting down)")
        return self._handle.fd

    def __len__(self) -> int:
        return self.size

    def head(self, size: int) -> FileSlice:
        """The first ``size`` bytes of this slice (same file)."""
        return FileSlice(self._handle, self.position, min(size, self.size))

    def read(self) -> bytes:
        """The slice's bytes (for paths that cannot use sendfile, and for tests)."""
        fd = self.fileno()
        data = os.pread(fd, self.size, self.position)
        if len(data) == self.size:
            return data
        parts = [data]
        done = len(data)
        while done < self.size:
            chunk = os.pread(fd, self.size - done, self.position + done)
            if not chunk:
                raise OSError(
                    f"{self._handle.path}: expected {self.size} bytes at {self.position}, "
                    f"file ended after {done}"
                )
            parts.append(chunk)
            done += len(chunk)
        return b"".join(parts)

    def __repr__(self) -> str:
        return f"FileSlice({self._handle.path!r}, position={self.position}, size={self.size})"
