"""The head scan under every prompt format; rank correlations and the ranking across formats."""
import pandas as pd

from gna.io import sha256_file, write_csv
from gna.models import load_model
from gna.jobs.script_job import job, provenance
from gna.probes.kv import read_jsonl
from gna.probes.scoring import encode
from gna.questions.formats import across_formats, rank_correlations, usable_formats
from gna.scan import scan

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    model, tok = load_model(p.spec)
    parts = []
    for fmt, path in zip(p.formats, snakemake.input.probes):
        encoded = encode(read_jsonl(path), tok, name=path)
        ranking, _ = scan(model, encoded, batch_size=p.batch_size, max_rows=p.max_rows, model_name=w.model,
                          progress=False)
        parts.append(ranking.assign(format=fmt, chance=1 / encoded.n_choices, probe=str(path),
                                    probe_sha256=sha256_file(path)))
        log.info("%s: baseline %.3f (chance %.3f); top heads\n%s", fmt, ranking.baseline_accuracy[0],
                 1 / encoded.n_choices, ranking.head(5).to_string())
    rankings = pd.concat(parts, ignore_index=True)
    used = usable_formats(rankings, p.above_chance)
    log.info("formats above chance: %s; rank correlations\n%s", used, rank_correlations(rankings).to_string())
    tags = provenance()
    write_csv(rankings.assign(**tags), snakemake.output.rankings)
    write_csv(across_formats(rankings, used, p.top_k).assign(**tags), snakemake.output.ranking)
