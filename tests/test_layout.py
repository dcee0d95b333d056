"""One hop from a rule to its code: every rule's script is named after the rule, every script
serves a rule, and every experiment's table and figure rules sit in its own rule file."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "workflow/rules"


def rule_blocks() -> dict[str, tuple[str, str]]:
    """rule -> (its rule file, its block)."""
    out = {}
    for path in sorted(RULES.glob("*.smk")):
        parts = re.split(r"^\s*rule (\w+):", path.read_text(), flags=re.M)
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
