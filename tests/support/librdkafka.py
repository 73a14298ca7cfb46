"""Locate and load librdkafka, and declare the C prototypes that the mock cluster wrapper uses.

The library is the copy bundled in the confluent-kafka wheel (``confluent_kafka.libs/`` on Linux,
``confluent_kafka/.dylibs/`` on macOS), so tests drive exactly the librdkafka the confluent-kafka
peer uses.  Set ``SAMSA_LIBRDKAFKA`` to a path to load another build instead.

The mock API (``rdkafka_mock.h``) is experimental and outside librdkafka's ABI promise, so
prototypes here were checked against the headers and the symbols the bundled 2.16.0 exports.
Functions that a given build does not export are left unbound; :func:`has` tells which exist.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
from ctypes import (
    POINTER,
    c_char_p,
    c_int,
    c_int16,
    c_int32,
    c_int64,
    c_size_t,
    c_void_p,
)
from pathlib import Path

ENV_OVERRIDE = "SAMSA_LIBRDKAFKA"

# rd_kafka_resp_err_t and other C enums are plain ints on every supported ABI.
c_err = c_int

# name -> (restype, fixed argtypes).  Variadic functions list only their fixed arguments;
# ctypes passes extra arguments with the default promotions, which is what C varargs expect.
_PROTOTYPES: dict[str, tuple[object, list[object]]] = {
    # rdkafka.h
    "rd_kafka_version": (c_int, []),
    "rd_kafka_version_str": (c_char_p, []),
    "rd_kafka_err2name": (c_char_p, [c_err]),
    "rd_kafka_err2str": (c_char_p, [c_err]),
    "rd_kafka_conf_new": (c_void_p, []),
    "rd_kafka_conf_destroy": (None, [c_void_p]),
    "rd_kafka_conf_set": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_size_t]),
    "rd_kafka_new": (c_void_p, [c_int, c_void_p, c_char_p, c_size_t]),
    "rd_kafka_destroy": (None, [c_void_p]),
    # rdkafka_mock.h: cluster
    "rd_kafka_mock_cluster_new": (c_void_p, [c_void_p, c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (c_char_p, [c_void_p]),
    # topics and partitions
    "rd_kafka_mock_topic_create": (c_err, [c_void_p, c_char_p, c_int, c_int]),
    "rd_kafka_mock_topic_delete": (c_err, [c_void_p, c_char_p]),
    "rd_kafka_mock_topic_set_error": (None, [c_void_p, c_char_p, c_err]),
    "rd_kafka_mock_partition_set_leader": (
        c_err,
        [c_void_p, c_char_p, c_int32, c_int32],
    ),
    "rd_kafka_mock_partition_set_follower": (
        c_err,
        [c_void_p, c_char_p, c_int32, c_int32],
    ),
    "rd_kafka_mock_partition_set_follower_wmarks": (
        c_err,
        [c_void_p, c_char_p, c_int32, c_int64, c_int64],
    ),
    "rd_kafka_mock_partition_delete_records": (
        c_err,
        [c_void_p, c_char_p, c_int32, c_int64],
    ),
    "rd_kafka_mock_partition_push_request_errors": (  # variadic: cnt x rd_kafka_resp_err_t
        c_err,
        [c_void_p, c_char_p, c_int32, c_int16, c_size_t],
    ),
    # brokers
    "rd_kafka_mock_broker_set_down": (c_err, [c_void_p, c_int32]),
    "rd_kafka_mock_broker_set_up": (c_err, [c_void_p, c_int32]),
    "rd_kafka_mock_broker_set_rtt": (c_err, [c_void_p, c_int32, c_int]),
    "rd_kafka_mock_broker_set_rack": (c_err, [c_void_p, c_int32, c_char_p]),
    "rd_kafka_mock_broker_decommission": (c_err, [c_void_p, c_int32]),
    "rd_kafka_mock_broker_add": (c_err, [c_void_p, c_int32]),
    "rd_kafka_mock_broker_push_request_error_rtts": (  # variadic: cnt x (err, int rtt_ms)
        c_err,
        [c_void_p, c_int32, c_int16, c_size_t],
    ),
    "rd_kafka_mock_broker_error_stack_cnt": (
        c_err,
        [c_void_p, c_int32, c_int16, POINTER(c_size_t)],
    ),
    # cluster-wide error injection and settings
    "rd_kafka_mock_push_request_errors": (
        None,
        [c_void_p, c_int16, c_size_t],
    ),  # variadic
    "rd_kafka_mock_push_request_errors_array": (
        None,
        [c_void_p, c_int16, c_size_t, POINTER(c_err)],
    ),
    "rd_kafka_mock_clear_request_errors": (None, [c_void_p, c_int16]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [c_void_p, c_int32]),
    "rd_kafka_mock_coordinator_set": (c_err, [c_void_p, c_char_p, c_char_p, c_int32]),
    "rd_kafka_mock_set_apiversion": (c_err, [c_void_p, c_int16, c_int16, c_int16]),
    # request tracking
    "rd_kafka_mock_start_request_tracking": (None, [c_void_p]),
    "rd_kafka_mock_stop_request_tracking": (None, [c_void_p]),
    "rd_kafka_mock_clear_requests": (None, [c_void_p]),
    "rd_kafka_mock_get_requests": (POINTER(c_void_p), [c_void_p, POINTER(c_size_t)]),
    "rd_kafka_mock_request_destroy_array": (None, [POINTER(c_void_p), c_size_t]),
    "rd_kafka_mock_request_id": (c_int32, [c_void_p]),
    "rd_kafka_mock_request_api_key": (c_int16, [c_void_p]),
    "rd_kafka_mock_request_timestamp": (c_int64, [c_void_p]),
}

# Without these the wrapper cannot work at all.
REQUIRED = (
    "rd_kafka_conf_new",
    "rd_kafka_conf_set",
    "rd_kafka_conf_destroy",
    "rd_kafka_new",
    "rd_kafka_destroy",
    "rd_kafka_err2name",
    "rd_kafka_mock_cluster_new",
    "rd_kafka_mock_cluster_destroy",
    "rd_kafka_mock_cluster_bootstraps",
)


class LibrdkafkaNotFoundError(RuntimeError):
    """No usable librdkafka shared library was found."""


def _mapped_librdkafka() -> list[str]:
    """Paths of librdkafka images already mapped into this process (Linux only)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {
                line.split(maxsplit=5)[-1].strip()
                for line in maps
                if "librdkafka" in line
            }
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and os.path.exists(p))


def find_library() -> str:
    """Return the path of the librdkafka shared library to load.

    Order: ``$SAMSA_LIBRDKAFKA``; the librdkafka that importing confluent_kafka mapped into this
    process; a glob next to the confluent_kafka package.
    """
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        if not os.path.exists(override):
            raise LibrdkafkaNotFoundError(f"{ENV_OVERRIDE}={override!r} does not exist")
        return override
    try:
        # Importing the extension maps the bundled library into this process.
        import confluent_kafka
        import confluent_kafka.cimpl
    except ImportError as exc:
        raise LibrdkafkaNotFoundError(
            "confluent-kafka is not installed; install it (pip install 'confluent-kafka>=2.16') "
            f"or point {ENV_OVERRIDE} at a librdkafka shared library"
        ) from exc
    mapped = _mapped_librdkafka()
    if mapped:
        return mapped[0]
    package_dir = Path(confluent_kafka.__file__).resolve().parent
    patterns = [
        str(package_dir.parent / "confluent_kafka.libs" / "librdkafka*.so*"),
        str(package_dir / ".dylibs" / "librdkafka*.dylib"),
        str(package_dir.parent / "confluent_kafka.libs" / "librdkafka*.dll"),
    ]
    for pattern in patterns:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    raise LibrdkafkaNotFoundError(
        f"no librdkafka found next to {package_dir}; looked for {patterns}; "
        f"set {ENV_OVERRIDE} to the library's path"
    )


@functools.cache
def load() -> ctypes.CDLL:
    """Load librdkafka once and attach prototypes to every function it exports."""
    path = find_library()
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    missing = [name for name in REQUIRED if not has(name, lib)]
    if missing:
        raise LibrdkafkaNotFoundError(f"{path} lacks required symbols {missing}")
    return lib


def has(name: str, lib: ctypes.CDLL | None = None) -> bool:
    """Whether the loaded librdkafka exports ``name``."""
    try:
        getattr(lib if lib is not None else load(), name)
    except AttributeError:
        return False
    return True


def err_name(code: int) -> str:
    """librdkafka's name for an error code (``NOT_LEADER_OR_FOLLOWER``, ``_UNKNOWN_BROKER``)."""
    raw = load().rd_kafka_err2name(code)
    return raw.decode() if raw else f"ERR_{code}"


def version() -> str:
    """The loaded librdkafka's version string, e.g. ``2.16.0``."""
    lib = load()
    return (
        lib.rd_kafka_version_str().decode() if has("rd_kafka_version_str", lib) else "?"
    )
