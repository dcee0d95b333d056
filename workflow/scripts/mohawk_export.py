"""A ranking's top k as goombalab/mohawk's architecture_<k>.yaml and --heads map (gna.questions.mohawk)."""
import pandas as pd

from gna.io import write_text
from gna.jobs.script_job import job
from gna.questions.mohawk import export, model_head_dim

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    head_dim = p.head_dim or model_head_dim(p.source)
    files = export(pd.read_csv(snakemake.input.ranking), int(w.k), p.n_layers, head_dim, w.model)
    write_text(files[f"heads_{w.k}.txt"], snakemake.output.heads)
    write_text(files[f"architecture_{w.k}.yaml"], snakemake.output.yaml)
    log.info("%s", files[f"architecture_{w.k}.yaml"])
