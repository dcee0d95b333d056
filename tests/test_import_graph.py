"""The library's import graph has no cycle, counting the imports inside functions too (a lazy import
that goes back to its importer is a circle a reader must hold in mind, and the next refactor may
make it eager) and the modules one starts as a process (``python -m gna.x``): every module of ``gna``
can be imported on its own, and a package's ``__init__`` never needs a module that needs the package
back. What the Snakefile imports at every parse imports no torch."""
import ast
import re
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


def imports_of(mod: str, path: Path, lazy: bool = True, type_checking: bool = False) -> set[str]:
    """gna modules ``mod`` imports, each with the packages it passes through: at module level, and
    with ``lazy`` also inside functions (those run later, but are edges of the graph all the same);
    those under ``if TYPE_CHECKING:`` (never run) only with ``type_checking``."""
    is_pkg = path.name == "__init__.py"
    out = set()
    tree = ast.parse(path.read_text())
    skip = set() if type_checking else _type_checking_only(tree)
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


def launches_of(path: Path) -> set[str]:
    """gna modules ``path`` starts as a process: the name after a ``"-m"`` in a list or tuple (a
    command line), written there or held by a module-level constant. A module started so is an edge
    as much as one imported: renaming it breaks the starter. A ``"-m"`` followed by anything else
    (a parameter, an expression) comes back as ``"?"``, a start the graph cannot follow."""
    tree = ast.parse(path.read_text())
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                 and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.List, ast.Tuple)):
            continue
        for flag, arg in zip(node.elts, node.elts[1:]):
            if not (isinstance(flag, ast.Constant) and flag.value == "-m"):
                continue
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                name = arg.value
            else:
                name = constants.get(arg.id, "?") if isinstance(arg, ast.Name) else "?"
            if name == "?" or name == "gna" or name.startswith("gna."):
                out.add(name)
    return out


def edges_of(mod: str, path: Path) -> set[str]:
    """Everything ``mod`` needs to run: its imports, lazy ones included, and the modules it starts."""
    return imports_of(mod, path) | (launches_of(path) - {mod})


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
    cycle = find_cycle({m: edges_of(m, p) for m, p in MODULES.items()})
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _has_main_block(path: Path) -> bool:
    return any(isinstance(n, ast.If) and ast.unparse(n.test).replace("'", '"') == '__name__ == "__main__"'
               for n in ast.parse(path.read_text()).body)


def launch_problems(launches: dict[str, set[str]]) -> list[str]:
    """What is wrong with each ``starter -> started modules``: a name the graph cannot read, a module
    that does not exist, one with no ``__main__`` block to run."""
    problems = []
    for starter, names in sorted(launches.items()):
        for name in sorted(names):
            if name == "?":
                problems.append(f"{starter} starts a module by a name the import graph cannot read")
            elif name not in MODULES:
                problems.append(f"{starter} starts {name}, which is no module of gna")
            elif not _has_main_block(MODULES[name]):
                problems.append(f"{starter} starts {name}, which has no __main__ block")
    return problems


def test_every_module_started_as_a_process_exists_and_can_run():
    """A module the library starts with ``python -m`` (the stage job's ranks) is named where the graph
    reads it, exists, and has a ``__main__`` block to run."""
    launches = {m: launches_of(p) for m, p in MODULES.items() if launches_of(p)}
    assert launch_problems(launches) == []
    assert launches == {"gna.hybrid.stage_launch": {"gna.hybrid.stage_job"}}


def test_the_launch_check_sees_a_started_module(tmp_path):
    """The check itself: a ``-m`` name held by a constant is an edge (a circle through it is found),
    a missing module is named as such, and a name made at run time is a start it cannot follow."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text('MOD = "gna.b"\ndef start(f):\n    return ["python", "-m", MOD, f]\n')
    b.write_text("def f():\n    from .a import start\nif __name__ == '__main__':\n    f()\n")
    MODULES.update({"gna.a": a, "gna.b": b})
    try:
        assert launches_of(a) == {"gna.b"} and _has_main_block(b)
        graph = {"gna.a": edges_of("gna.a", a), "gna.b": edges_of("gna.b", b)}
        assert find_cycle(graph) == ["gna.a", "gna.b", "gna.a"]
        assert launch_problems({"gna.a": launches_of(a)}) == []
        b.write_text("def f():\n    from .a import start\n")
        assert launch_problems({"gna.a": launches_of(a)}) == ["gna.a starts gna.b, which has no __main__ block"]
        a.write_text('def start(f):\n    return ("python", "-m", "gna.missing", f)\n')
        assert launch_problems({"gna.a": launches_of(a)}) == ["gna.a starts gna.missing, which is no module of gna"]
        a.write_text('def start(module, f):\n    return ["python", "-m", module, f]\n')
        assert launch_problems({"gna.a": launches_of(a)}) == [
            "gna.a starts a module by a name the import graph cannot read"]
        a.write_text('CMD = ["python", "-m", "pip", "install"]\n')
        assert launches_of(a) == set()
    finally:
        del MODULES["gna.a"], MODULES["gna.b"]


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


def test_no_circle_even_through_imports_for_the_type_checker():
    """Not even an import under ``if TYPE_CHECKING:`` closes a circle: a type two modules both need
    (the encoded probe set of gna.probes.batches and gna.probes.scoring) sits in a module below them,
    so a reader meets each module's dependencies before it and a type checker resolves no cycle."""
    graph = {m: imports_of(m, p, type_checking=True) for m, p in MODULES.items()}
    assert "gna.probes.encoded" in graph["gna.probes.batches"]
    probes = {m: graph[m] & {n for n in MODULES if n.startswith("gna.probes.")}
              for m in MODULES if m.startswith("gna.probes.")}
    assert find_cycle(probes) is None, "import cycle in gna.probes: " + " -> ".join(find_cycle(probes))
    assert find_cycle(graph) is None, "import cycle: " + " -> ".join(find_cycle(graph))


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
    for pkg in ("scan", "jobs", "config", "evaluation", "patterns", "hybrid", "hybrid/study"):
        assert "May import:" in (PKG / pkg / "__init__.py").read_text(), pkg


# -- what the Snakefile imports at every parse ------------------------------------------------------

ROOT = PKG.parents[1]
WORKFLOW_FILES = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").rglob("*.smk"))]
HEAVY = ("torch", "transformers", "datasets")


def workflow_imports() -> set[str]:
    """The gna modules the Snakefile and the rule files import (``from gna.x import y``, at any indent:
    a rule file's function runs at parse time too); ``y`` counts when it is a module itself."""
    out = set()
    for f in WORKFLOW_FILES:
        for base, names in re.findall(r"^\s*from (gna[\w.]*) import \(?([\w ,]*)", f.read_text(), flags=re.M):
            out.add(base)
            out |= {f"{base}.{n.split()[0]}" for n in names.split(",") if n.strip()
                    and f"{base}.{n.split()[0]}" in MODULES}
        out |= set(re.findall(r"^\s*import (gna[\w.]*)", f.read_text(), flags=re.M))
    return out


def heavy_imports(modules, path: Path = PKG.parent) -> list[str]:
    """The modules, imported in turn in one fresh interpreter (``path`` first on its ``sys.path``),
    until one loads a heavy package (torch, transformers, datasets): ``[module, package...]`` for that
    one, ``[]`` when they all stay out."""
    code = ("import importlib, sys\n"
            f"sys.path.insert(0, {str(path)!r})\n"
            f"for m in {sorted(modules)!r}:\n"
            "    importlib.import_module(m)\n"
            f"    loaded = [h for h in {HEAVY!r} if h in sys.modules]\n"
            "    if loaded:\n"
            "        print(m, *loaded)\n"
            "        break\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_the_snakefile_imports_distillation_only_from_its_torch_free_part():
    """Snakemake parses the Snakefile on every call (a dry run, a status, each job's own start): it
    may import from gna.hybrid only gna.hybrid.study, and that part, like everything else the
    workflow imports, loads no torch, transformers or datasets."""
    used = workflow_imports()
    assert "gna.hybrid.study.variants" in used and "gna.hybrid.study.token_sets" in used
    hybrid = {m for m in used if m.startswith("gna.hybrid")}
    assert all(m in ("gna.hybrid", "gna.hybrid.study") or m.startswith("gna.hybrid.study.")
               for m in hybrid), hybrid
    study = {m for m in MODULES if m.startswith("gna.hybrid.study")}
    assert heavy_imports(used | study | {"gna.hybrid", "gna.hybrid.stage_launch"}) == []


def test_the_torch_free_check_sees_torch(tmp_path):
    """The check itself: the first module that loads torch is named, with what it loaded."""
    (tmp_path / "light.py").write_text("import json\n")
    (tmp_path / "uses_torch.py").write_text("import torch\n")
    assert heavy_imports(["light"], tmp_path) == []
    assert heavy_imports(["light", "uses_torch"], tmp_path) == ["uses_torch", "torch"]
