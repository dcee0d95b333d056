# Helpers of the rules in workflow/rules/probe_formats.smk. The Snakefile reads workflow/rules/helpers/*.smk
# after common.smk and before the rule files (Snakemake's linter keeps functions out of a rule file).
def format_probe(fmt, values=""):
    """The probe of one format (probe_formats.formats), on the scan's pairs, kv_probe's seed and separator;
    ``values``: its value rule's part of the name (gna.probes.values.rule_tag; a model's kv_values)."""
    p = config["kv_probe"]
    tag = {v: k for k, v in SEPARATORS.items()}[p["separator"]]
    return f"results/probes/formats/kv-n{config['scan']['n_pairs']}-s{p['seed']}-{tag}{values}.{fmt}.examples.jsonl"


def model_rule_tag(model, separator=None):
    """The part of a probe's name that names ``model``'s kv_values ("" for the paper's 0-99)."""
    return rule_tag(kv_values(model, separator))
