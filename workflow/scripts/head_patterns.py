"""The top heads' mixing patterns on the first probe prompts, for the head explorer page."""
import pandas as pd

from gna.models import load_model
from gna.jobs.script_job import job
from gna.probes.kv import read_jsonl
from gna.report import explorer

with job(snakemake):
    model, tok = load_model(snakemake.params.spec)
    ranking, ga = pd.read_csv(snakemake.input.ranking), pd.read_csv(snakemake.input.ga)
    examples = read_jsonl(snakemake.input.probe)
    prompts = [e["prompt"] for e in examples[:snakemake.params.prompts]]
    first = examples[0]
    probe = (f"{snakemake.input.probe}: {len(examples)} prompts of {first.get('n_pairs')} pairs "
             f"({first.get('fmt')} format); patterns on the first {len(prompts)}")
    heads = explorer.heads_to_show(ranking, ga, snakemake.params.top)
    data = explorer.explorer_data(snakemake.wildcards.model, ranking, ga,
                                  explorer.head_patterns(model, tok, prompts, heads), probe)
    explorer.write_data(data, snakemake.output[0])
