"""One vocabulary (docs/architecture.md, "One word per meaning"): a device request is read once,
by vclip._device, and travels below the public entry points as a ``Device``; a renamed public word
keeps its old spelling only as a deprecated alias."""

import ast
import warnings

import pytest
from helpers import ROOT

import vclip.synthetic
from vclip._device import CPU, Device, DeviceRequest, parse_device

PACKAGE = ROOT / "vclip"
DEVICE_WORDS = ("cpu", "cuda")


def _is_device_text(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (node.value in DEVICE_WORDS or node.value.startswith("cuda:")))


def device_string_tests(source: str) -> list[int]:
    """Lines of ``source`` that compare with a device string (``x == "cpu"``, ``"cuda" in x``...)
    or test one's start (``x.startswith("cuda")``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(map(_is_device_text, [node.left, *node.comparators])):
            found.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and any(
                  isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                  and arg.value.startswith(DEVICE_WORDS) for arg in node.args)):
            found.append(node.lineno)
    return found


def test_the_check_finds_device_string_tests():
    assert device_string_tests('if device == "cpu": pass') == [1]
    assert device_string_tests('x = "cuda:0" != device') == [1]
    assert device_string_tests('ok = runner.device.startswith("cuda")') == [1]
    assert device_string_tests('ok = device.is_cuda and label == "auto"') == []
    assert device_string_tests('threads = THREADS_PER_PROCESS[device.type]') == []


def test_no_module_but_the_device_module_reads_a_device_string():
    """Below the public entry points a device is a ``Device`` (``.is_cuda``, ``.type``), so no module
    but vclip/_device.py compares a device string."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_device.py":
            continue
        lines = device_string_tests(path.read_text())
        if lines:
            found[str(path.relative_to(ROOT))] = lines
    assert found == {}


def test_a_device_reads_as_its_string_at_the_edges():
    assert (str(CPU), str(Device("cuda", 1)), str(Device("cuda"))) == ("cpu", "cuda:1", "cuda")
    assert parse_device("cuda:1") == DeviceRequest("cuda", 1) and parse_device(Device("cuda")) == DeviceRequest("cuda")
    assert parse_device(" AUTO ").is_auto and parse_device("auto").may_use_gpu
    assert parse_device("cuda").names_cuda and not parse_device("auto").names_cuda
    assert not parse_device(CPU).may_use_gpu and str(parse_device("cuda:2")) == "cuda:2"


@pytest.mark.parametrize("old, new", [("LabelledVideo", "SceneVideo"), ("LabelledEvent", "SceneEvent")])
def test_the_old_spelling_of_a_public_name_is_a_deprecated_alias(old, new):
    with pytest.warns(DeprecationWarning, match=rf"vclip\.synthetic\.{old} is deprecated; use vclip\.synthetic\.{new}"):
        alias = getattr(vclip.synthetic, old)
    assert alias is getattr(vclip.synthetic, new)
    assert old not in vclip.synthetic.__all__ and new in vclip.synthetic.__all__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(vclip.synthetic, new)
