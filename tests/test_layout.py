"""One hop from a rule to its code: every rule's script is named after the rule, every script
serves a rule, and every experiment's table and figure rules sit in its own rule file."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "workflow/rules"


def rule_blocks() -> dict[str, tuple[str, str]]:
    """rule (or checkpoint) -> (its rule file, its block)."""
    out = {}
    for path in sorted(RULES.glob("*.smk")):
        parts = re.split(r"^\s*(?:rule|checkpoint) (\w+):", path.read_text(), flags=re.M)
        out.update({name: (path.name, body) for name, body in zip(parts[1::2], parts[2::2])})
    return out


def test_every_rule_script_is_named_after_its_rule_and_every_script_serves_one():
    scripts = {}
    for name, (_, body) in rule_blocks().items():
        m = re.search(r'script:\s*\n\s*"\.\./scripts/(\w+)\.py"', body)
        if m:
            scripts[name] = m.group(1)
    assert {r: s for r, s in scripts.items() if r != s} == {}
    on_disk = {p.stem for p in (ROOT / "workflow/scripts").glob("*.py")}
    assert on_disk == set(scripts.values()), sorted(on_disk ^ set(scripts.values()))


def test_no_script_branches_on_its_rule():
    for path in (ROOT / "workflow/scripts").glob("*.py"):
        assert "snakemake.rule" not in path.read_text(), path.name


def test_figure_rules_sit_beside_their_experiments():
    where = {name: f for name, (f, _) in rule_blocks().items()}
    for table, experiment in {"head_keeping_table": "head_keeping", "kv_pairs_figure": "kv_pairs",
                              "topk_tables": "topk_removal", "topk_figure": "topk_removal",
                              "ssm_masking_figure": "ssm_masking", "hybrid_attention_table": "hybrid_attention",
                              "layer_swap_figure": "layer_swap", "hybrid_tables": "evaluate_hybrid",
                              "pruning_figures": "individual_pruning", "head_ranking_figure": "head_scan",
                              "ga_heatmaps": "head_scan"}.items():
        assert where[table] == where[experiment], (table, where[table], where[experiment])
    assert set(n for n, f in where.items() if f == "report.smk") == {"findings"}


# Packages named after the architecture they hold, each with transformers' modeling.py layout.
ARCHITECTURE_MODULES = {"modeling.py", "configuration.py", "kernels.py"}


def test_modules_of_one_name_are_one_concept_at_several_layers():
    """Two library modules share a name only where they are one concept at two layers (run, report,
    verdict), and then their docstrings say so; anything else gets a name that says what it holds."""
    import ast

    by_name: dict[str, list[Path]] = {}
    for p in (ROOT / "workflow/gna").rglob("*.py"):
        if p.name != "__init__.py" and p.name not in ARCHITECTURE_MODULES:
            by_name.setdefault(p.name, []).append(p)
    for name, paths in by_name.items():
        if len(paths) > 1:
            for p in paths:
                doc = ast.get_docstring(ast.parse(p.read_text())) or ""
                assert "One concept at" in doc, f"{p.relative_to(ROOT)} shares its name with {len(paths) - 1} other(s)"


# -- the library's folders ----------------------------------------------------------------------

GNA = ROOT / "workflow/gna"
# A module one reading holds (nanoGPT's files); a model's own implementation (models/<arch>/modeling.py,
# transformers' layout) is one architecture's forward and is allowed past it.
MAX_LINES = 400
TOP_LEVEL_MODULES = {"__init__.py", "cli.py", "errors.py", "io.py"}


def test_no_module_past_what_one_reading_holds():
    over = {str(p.relative_to(GNA)): n for p in GNA.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES
            and not (p.name == "modeling.py" and p.parent.parent.name == "models")}
    assert over == {}, f"modules over {MAX_LINES} lines (split them by what they hold): {over}"


def test_the_size_check_spares_only_models_own_implementations():
    exempt = [p for p in GNA.rglob("*.py") if p.name == "modeling.py" and p.parent.parent.name == "models"]
    assert {p.parent.name for p in exempt} == {"llamba", "hybrid_student"}


def test_the_top_level_is_packages_and_the_cross_cutting_modules():
    """A reader who wants "the scan" or "how a job runs" opens one folder: beside the packages, the
    top level holds only what every package uses (errors, io), the command line and the old names."""
    assert {p.name for p in GNA.glob("*.py")} == TOP_LEVEL_MODULES


def test_every_package_says_what_it_holds():
    import ast

    for init in GNA.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 8, f"{init.relative_to(ROOT)}: a docstring saying what the package holds"


def test_no_issue_numbers_in_code():
    """The reason belongs in the sentence: a reader of the code has no tracker."""
    pattern = re.compile(r"\b[Ii]ssues? #?\d+")
    hits = [f"{p.relative_to(ROOT)}:{i}" for base in ("workflow", "tests", "benchmarks", "docs")
            for p in (ROOT / base).rglob("*") if p.suffix in (".py", ".smk", ".md", ".yaml")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


# A function one look holds (its docstring included); one that is a single sequential algorithm (a scan's
# loop, a method's steps in order) may run longer where its docstring says why, on a line of the form
# "Over 60 lines ...: <the reason>".
MAX_FUNCTION_LINES = 60
SAYS_WHY = re.compile(rf"^\s*Over {MAX_FUNCTION_LINES} lines[^:]*:\s*\S", re.M)


def long_functions() -> dict[str, int]:
    """Every library function past MAX_FUNCTION_LINES whose docstring says not why: "module:function" -> lines."""
    import ast

    out = {}
    for p in GNA.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and not SAYS_WHY.search(ast.get_docstring(node) or ""):
                    out[f"{p.relative_to(GNA)}:{node.name}"] = lines
    return out


def test_no_function_past_what_one_look_holds():
    over = long_functions()
    assert over == {}, (f"functions over {MAX_FUNCTION_LINES} lines (split them by responsibility, or say why one "
                        f"sequential algorithm needs them in a docstring line 'Over {MAX_FUNCTION_LINES} lines ...: "
                        f"<why>'): {over}")


def test_the_function_length_check_reads_its_reasons():
    assert SAYS_WHY.search("Does x.\n\n    Over 60 lines by this docstring only: the loop is one batch's chunks.")
    assert not SAYS_WHY.search("Over 60 lines:") and not SAYS_WHY.search("Does x; over 60 lines: why")


# -- an experiment's library code, layered (docs/library.md, Layout) -----------------------------

def test_every_claim_check_is_in_the_findings_package():
    """A findings section the rule files declare names a function of gna.report.findings: an
    experiment's claim checks are its module there, not beside its computation."""
    sections = [m for p in RULES.glob("*.smk")
                for m in re.findall(r"""Section\(\s*\d+\s*,\s*["']([\w.]+):\w+["']""", p.read_text())]
    assert sections and [m for m in sections if not m.startswith("gna.report.findings.")] == []


def test_tables_and_figures_are_drawn_in_the_report_package_only():
    """The computation layers (experiments, questions, hybrid) write rows; what draws or tabulates them for
    a reader (matplotlib) is gna.report's."""
    drawing = [str(p.relative_to(GNA)) for pkg in ("experiments", "questions", "hybrid") for p in (GNA / pkg).rglob("*.py")
               if re.search(r"^\s*(?:import|from)\s+matplotlib", p.read_text(), re.M)]
    assert drawing == []
