"""results/answer_position/{model}/{ablated}.csv: KV-retrieval accuracy with the scan's top heads
ablated nowhere, everywhere or at the answer position only (gna.experiments.answer_position)."""
import pandas as pd

from gna.experiments import answer_position
from gna.experiments.head_selection import top_heads
from gna.interventions import applied
from gna.io import write_csv
from gna.jobs.script_job import job
from gna.models import load_model

with job(snakemake) as log:
    p = snakemake.params
    model, tokenizer = load_model(p.spec)
    heads = top_heads(pd.read_csv(snakemake.input.ranking), p.top)
    probes = answer_position.probe_sets(p.probes, snakemake.input.probes, tokenizer)
    # the condition is entered here: the library cannot import the vocabulary, which imports it
    with applied(model, answer_position.interventions(heads, snakemake.wildcards.ablated)):
        rows = answer_position.accuracy_rows(model, probes, {**p.fields, "heads": answer_position.heads_label(heads)},
                                             p.batch_size)
    log.info("%s ablated %s: accuracy %s", rows.heads[0], snakemake.wildcards.ablated, list(rows.accuracy))
    write_csv(rows, snakemake.output[0])
