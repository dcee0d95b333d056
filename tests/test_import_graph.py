"""The library's import graph has no cycle: every module of ``gna`` can be imported on its own, and
a package's ``__init__`` never needs a module that needs the package back (the circle that
``gna.hybrid`` -> ``gna.models`` -> ``gna.hybrid`` was)."""
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


def imports_at_load(mod: str, path: Path) -> set[str]:
    """gna modules ``mod`` imports when it is loaded: module-level imports (not those inside
    functions, which run later), each with the packages it passes through."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.parse(path.read_text()).body:
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


def test_no_import_cycle_among_gna_modules():
    graph = {m: imports_at_load(m, p) for m, p in MODULES.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_old_circle_is_gone():
    graph = {m: imports_at_load(m, p) for m, p in MODULES.items()}
    assert "gna.models.hybrid_student" in MODULES and "gna.hybrid.modeling" not in MODULES
    assert not any(n.startswith("gna.hybrid") for m in MODULES if m.startswith("gna.models") for n in graph[m])


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
