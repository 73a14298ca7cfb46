"""samsa/protocol/_classes.pyi (what mypy knows of the generated message classes) is current."""

import ast

import samsa.protocol
from samsa.protocol.apis import APIS
from samsa.protocol.message import Message
from samsa.protocol.stubs import STUB_PATH, render


def test_stub_matches_the_declarations() -> None:
    assert STUB_PATH.read_text() == render(), (
        "samsa/protocol/_classes.pyi is out of date: run `python -m samsa.protocol.stubs`"
    )


def test_stub_names_the_runtime_classes_and_fields() -> None:
    # Each class and nested struct class of the stub exists at run time with the same fields,
    # so the stub cannot describe something message.bind_api does not build.
    tree = ast.parse(STUB_PATH.read_text())
    tops = [node for node in tree.body
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_")]
    expected = {cls.__name__ for api in APIS.values()
                for cls in (api.request_class, api.response_class)}
    assert {top.name for top in tops} == expected
    for top in tops:
        runtime = getattr(samsa.protocol, top.name)
        assert _fields(top) == runtime._field_names
        nested = [n for n in top.body if isinstance(n, ast.ClassDef)]
        assert {n.name for n in nested} == {
            name for name, value in vars(runtime).items()
            if isinstance(value, type) and issubclass(value, Message)}
        for cls in nested:
            assert getattr(runtime, cls.name)._field_names == _fields(cls)


def _fields(cls: ast.ClassDef) -> tuple[str, ...]:
    return tuple(n.target.id for n in cls.body
                 if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))
