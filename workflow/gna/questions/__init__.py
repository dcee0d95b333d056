"""The questions the paper leaves open, as experiments on a model's head ranking.

- :mod:`.head_sets`: the KV score with a *set* of heads ablated together, batched as the scan
  batches single heads (every set of a chunk is one copy of the batch).
- :mod:`.pairs`: complementary or redundant pairs (``drop(a, b) - drop(a) - drop(b)``) and the
  smallest head set, found greedily, that takes retrieval to chance.
- :mod:`.formats`: one retrieval under several prompt formats on the same keys and values; per-format
  rankings, their rank correlations, format-sensitive heads and the ranking across formats.
- :mod:`.stability`: a ranking repeated over probe seeds: rank spread and top-k overlap.
- :mod:`.names`: the names of heads and head sets in the tables (torch-free, for the figures).
- :mod:`.mohawk`: a ranking's top k as goombalab/mohawk's inputs (architecture YAML and head map).
"""
