"""The questions the paper leaves open, as experiments on a model's head ranking: their computation
layer (their tables and figures are :mod:`gna.report.open_questions`, their verdicts in figures/findings.md
:mod:`gna.report.findings.open_questions`, quoted in the manual by :mod:`gna.report.quote`).

- :mod:`.head_sets`: the KV score with a *set* of heads ablated together, batched as the scan
  batches single heads (every set of a chunk is one copy of the batch).
- :mod:`.null`: the nulls and intervals every verdict rests on (beyond noise, independence,
  bootstrap over prompts and probe seeds).
- :mod:`.pairs`: overlapping or redundant pairs (against independence) and the smallest head sets
  that take retrieval to chance, by exhaustive search over a candidate pool.
- :mod:`.formats`: one retrieval under several prompt formats on the same keys and values; per-format
  rankings, their rank correlations, format-sensitive heads and the ranking across formats.
- :mod:`.stability`: a ranking repeated over probe seeds: rank spread, top-k overlap, rank intervals.
- :mod:`.paths`, :mod:`.ga_paths`: path patching by component (query, key, value) and position, the
  direct path to the logits, and the G-to-A matrix with intervals.
- :mod:`.roles`: G&A roles kept only for heads whose drop is beyond noise.
- :mod:`.names`: the names of heads and head sets in the tables (torch-free, for the figures).
- :mod:`.mohawk`: a ranking's top k as goombalab/mohawk's inputs (architecture YAML and head map).
"""
