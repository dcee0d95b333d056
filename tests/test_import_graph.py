"""The library's import graph has no cycle, counting the imports inside functions too (a lazy import
that goes back to its importer is a circle a reader must hold in mind, and the next refactor may
make it eager): every module of ``gna`` can be imported on its own, and a package's ``__init__``
never needs a module that needs the package back."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "workflow" / "gna"


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (never run)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for b in node.body for n in ast.walk(b)}
    return out


def imports_of(mod: str, path: Path, lazy: bool = True) -> set[str]:
    """gna modules ``mod`` imports, each with the packages it passes through: at module level, and
    with ``lazy`` also inside functions (those run later, but are edges of the graph all the same);
    never those under ``if TYPE_CHECKING:``."""
    is_pkg = path.name == "__init__.py"
    out = set()
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    nodes = [n for n in ast.walk(tree) if id(n) not in skip] if lazy else tree.body
    for node in nodes:
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(mod, node, is_pkg)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for t in targets:
            parts = t.split(".")
            for i in range(1, len(parts) + 1):  # importing gna.a.b runs gna.a first
                name = ".".join(parts[:i])
                if name in MODULES and name.startswith("gna"):
                    out.add(name)
    own = {".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 2)}
    return out - own  # a module's own packages are already being imported: not an edge


def imports_at_load(mod: str, path: Path) -> set[str]:
    return imports_of(mod, path, lazy=False)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_cycle_among_gna_modules_lazy_imports_included():
    cycle = find_cycle({m: imports_of(m, p) for m, p in MODULES.items()})
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_sees_a_lazy_circle(tmp_path):
    """The check itself: a circle closed only by an import inside a function is found, and an
    import under ``if TYPE_CHECKING:`` (never run) is no edge."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from . import b\n")
    b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    MODULES.update({"gna.a": a, "gna.b": b})  # imports_of resolves names against MODULES
    try:
        graph = {"gna.a": imports_of("gna.a", a), "gna.b": imports_of("gna.b", b)}
        assert graph == {"gna.a": {"gna.b"}, "gna.b": set()} and find_cycle(graph) is None
        b.write_text("def f():\n    from .a import x\n")
        graph["gna.b"] = imports_of("gna.b", b)
        assert imports_at_load("gna.b", b) == set()
        assert find_cycle(graph) == ["gna.a", "gna.b", "gna.a"]
    finally:
        del MODULES["gna.a"], MODULES["gna.b"]


def test_the_old_circles_are_gone():
    graph = {m: imports_of(m, p) for m, p in MODULES.items()}
    assert "gna.models.hybrid_student" in MODULES and "gna.hybrid.modeling" not in MODULES
    assert not any(n.startswith("gna.hybrid") for m in MODULES if m.startswith("gna.models") for n in graph[m])
    # the exact scan and the attribution methods built on it; Llamba's implementation and its adapter
    assert not any(n.startswith("gna.scan.attribution") for n in graph["gna.scan.exact"])
    assert not any(n.startswith("gna.models.adapters") for m in MODULES if m.startswith("gna.models.llamba")
                   for n in graph[m])


def test_every_module_imports_on_its_own():
    """Each module in a fresh interpreter (one process, modules dropped from sys.modules between
    them, so a module that only works after another was imported fails here)."""
    code = ("import importlib, sys\n"
            "base = set(sys.modules)\n"
            "bad = []\n"
            f"for m in {sorted(MODULES)!r}:\n"
            "    for k in [k for k in sys.modules if k == 'gna' or k.startswith('gna.')]:\n"
            "        del sys.modules[k]\n"
            "    try:\n"
            "        importlib.import_module(m)\n"
            "    except Exception as e:\n"
            "        bad.append(f'{m}: {type(e).__name__}: {e}')\n"
            "print('\\n'.join(bad)); sys.exit(1 if bad else 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]


def test_packages_import_only_what_their_docstring_allows():
    """A package whose docstring says what it may import (``May import: ``errors``, ...``) imports
    nothing else of gna, lazy imports included: the sentence is a checked claim, not a hope."""
    import re

    graph = {m: imports_of(m, p) for m, p in MODULES.items()}
    for pkg, path in MODULES.items():
        if path.name != "__init__.py" or pkg == "gna":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        claim = re.search(r"May import:(.*?)(?:\.\s*$|\.\s*\n\s*\n|;\s*never|\Z)", doc, flags=re.S)
        if not claim:
            continue
        allowed = {"gna." + n for n in re.findall(r"``([\w.]+)``", claim.group(1))}
        used = {n for m in MODULES if m == pkg or m.startswith(pkg + ".") for n in graph[m]
                if n != "gna" and not (n == pkg or n.startswith(pkg + "."))}
        beyond = {n for n in used if not any(n == a or n.startswith(a + ".") or a.startswith(n + ".")
                                             for a in allowed)}
        assert not beyond, f"{pkg} imports {sorted(beyond)}; its docstring allows {sorted(allowed)}"


def test_the_new_packages_say_what_they_may_import():
    for pkg in ("scan", "jobs", "config", "evaluation", "patterns"):
        assert "May import:" in (PKG / pkg / "__init__.py").read_text(), pkg
