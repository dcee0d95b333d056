"""Rank every head by the KV-retrieval drop when it alone is ablated (scan.method); classify the top ones."""

from gna.scan.attribution_ranking import guard_summary
from gna.patterns.ga_roles import classify_heads
from gna.questions.roles import roles_beyond_noise
from gna.io import write_csv
from gna.models import load_model
from gna.jobs.script_job import job, provenance
from gna.probes.guard import check_probe
from gna.probes.kv import probe_sha256, read_jsonl
from gna.probes.scoring import encode
from gna.scan import scan, top_k

with job(snakemake) as log:
    p = snakemake.params
    model, tok = load_model(p.spec)
    examples = read_jsonl(snakemake.input.probe)
    encoded = encode(examples, tok)
    checked = check_probe(model, tok, encoded, batch_size=p.batch_size, **p.probe_check,
                          what=f"the KV probe {snakemake.input.probe} (scan.probe_check)")
    ranking, guard = scan(model, encoded, method=p.method, batch_size=p.batch_size, baseline=checked.baseline,
                          max_rows=p.max_rows, model_name=snakemake.wildcards.model, **p.atp)
    ranking = ranking.assign(**checked.columns())
    ranking = ranking.assign(probe_sha256=probe_sha256(examples))  # the exact prompts it ranked on
    log.info("%s", guard_summary(guard))
    log.info("baseline accuracy %.3f; top heads:\n%s", ranking.baseline_accuracy[0], ranking.head(10))
    top = top_k(ranking, min(p.classify_top, len(ranking)))
    ga = classify_heads(model, tok, examples[:p.classify_examples], top, threshold=p.threshold)
    ga = roles_beyond_noise(model, encoded, ga, n_heads=len(ranking), baseline=checked.baseline,
                            batch_size=p.batch_size, max_rows=p.max_rows)
    ranking = ranking.assign(**provenance())  # after the scan: which fused kernels it ran
    ga = ranking.merge(ga, on=["layer", "head", "kind"])
    write_csv(ga.sort_values("rank"), snakemake.output.ga)
    write_csv(ranking, snakemake.output.ranking)
