"""kafka-python 3's JSON-schema message classes, found once for the interop tests."""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from typing import Any

# kafka-python loads its JSON with a deprecated importlib.resources call: not our noise.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol
    from kafka.protocol.api_message import ApiMessage


def kafka_python_classes() -> dict[tuple[int, str], Any]:
    """(API key, "request"/"response") -> kafka-python's primary class for it."""
    for mod in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        # .old holds the pre-3.0 hand-written classes; generate_stubs is a script.
        if ".old" in mod.name or mod.name.endswith("generate_stubs"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            importlib.import_module(mod.name)
    found: dict[tuple[int, str], Any] = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        # Versioned wrappers (Cls[3]) carry a _class_version; we want the primary classes.
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            found[(cls.API_KEY, cls.type)] = cls
    return found
