"""The layout the architecture page describes is the code's: every module placed in a layer (a
subpackage as one), every import (those inside functions too) going to its own layer or one below,
no import circle, private names used only inside the package that holds them, at most 30 modules at
the package's root, and no module longer than 600 lines."""

import ast
import re
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "vclip"
MAX_LINES = 600
MAX_ROOT_MODULES = 30


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def import_statements(name: str) -> list[tuple[list[str], str]]:
    """Each import statement of ``name``: the dotted names it imports (``vclip.a.b`` for ``from
    vclip.a import b``) and the module it names (``vclip.a``; the first name for ``import``)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    statements = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            statements.append(([f"{base}.{alias.name}" for alias in node.names], base))
        elif isinstance(node, ast.Import):
            statements += [([alias.name], alias.name) for alias in node.names]
    return statements


def imports_of(name: str) -> list[str]:
    """Every dotted name ``name`` imports from vclip (``vclip.a.b`` for ``from vclip.a import b``)."""
    found = [target for names, _ in import_statements(name) for target in names]
    return [target for target in found if target.split(".")[0] == "vclip"]


def imported_modules(name: str) -> set[str]:
    """The vclip modules ``name`` imports, anywhere in its code."""
    found = set()
    for names, base in import_statements(name):
        for target in names + [base]:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target.startswith("vclip") and target != name:
                found.add(target)
                break
    return found


def layers() -> list[list[str]]:
    """The modules of each layer of docs/architecture.md's table, bottom first (``_engine/`` for a package)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page[page.index("| layer | modules |"):].split("\n\n")[0].splitlines()[2:]
    return [re.findall(r"`([^`]+\.py|[^`]+/)`", row.split("|")[2]) for row in table]


def layer_of(name: str, placed: dict[str, int]) -> int:
    relative = name.removeprefix("vclip").removeprefix(".")
    first = relative.split(".")[0]
    if name in MODULES and f"{first}/" in placed:  # a module of a subpackage: the package's layer
        return placed[f"{first}/"]
    return placed[f"{relative.replace('.', '/')}.py" if relative else "__init__.py"]


def test_every_module_is_placed_in_one_layer():
    placed = [name for layer in layers() for name in layer]
    assert len(placed) == len(set(placed)), "a module is in two layers"
    top_level = {path.name for path in PACKAGE.glob("*.py")} | {
        f"{path.name}/" for path in PACKAGE.iterdir() if (path / "__init__.py").exists()
    }
    assert sorted(top_level - set(placed) - {"__init__.py"}) == []
    assert sorted(set(placed) - top_level) == []


def test_imports_go_down_the_layers():
    placed = {name: number for number, layer in enumerate(layers()) for name in layer}
    placed["__init__.py"] = len(placed)  # the package's face is above everything
    upward = []
    for name in MODULES:
        own = layer_of(name, placed)
        for target in imported_modules(name):
            if layer_of(target, placed) > own:
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_no_import_circles():
    graph = {name: imported_modules(name) - {"vclip"} for name in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                circles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_private_names_stay_in_their_package():
    """``_name`` (a module, a subpackage or an object) is imported only from inside the package that
    holds it: ``vclip._engine`` by any vclip module, ``vclip.catalog._read`` only inside
    ``vclip.catalog``, ``_Pool`` of ``vclip._jobs.runner`` only inside ``vclip._jobs``."""
    outside = []
    for name in MODULES:
        for target in imports_of(name):
            parts = target.split(".")
            private = [i for i, part in enumerate(parts) if part.startswith("_") and not part.endswith("__")]
            if not private:
                continue
            holder = ".".join(parts[:private[0]])
            if holder in MODULES and MODULES[holder].name != "__init__.py":
                holder = holder.rpartition(".")[0]  # a name defined in a module: that module's package
            if name != holder and not name.startswith(holder + "."):
                outside.append(f"{name} imports {target}")
    assert outside == []


def test_the_root_holds_at_most_30_modules():
    assert len(list(PACKAGE.glob("*.py"))) <= MAX_ROOT_MODULES


def test_no_module_is_longer_than_600_lines():
    long = {name: lines for name, path in MODULES.items() if (lines := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}
