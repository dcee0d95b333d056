"""A distillation study described without torch: what the workflow reads when Snakemake parses it,
and the data its jobs stream.

- :mod:`.variants`: the students' names (``k{k}-s{state}-ranked``, ``-random{draw}``), made from the
  config and read back by the evaluation and the plan.
- :mod:`.data`: each stage's data (the micro corpus or the web mix) and token budget, the streams
  the stages read, the held-out perplexity, the checkpoint folder's identity.
- :mod:`.web_stream`: fineweb-edu and finemath, tokenized and packed into rows.
- :mod:`.token_shards`: those rows written once into shard files and read offline, with random access.
- :mod:`.token_sets`: which folders of prepared tokens a study's jobs read (rule ``distill_tokens``).
- :mod:`.stage_ranks`: how many ranks a stage runs on and what they ask of Slurm.
- :mod:`.settings`: the layer swap's and the distillation's config keys, their settings and their
  config checks.

The Snakefile, the rules and the plan import these at every parse, so nothing here imports torch at
module level (torch, transformers and datasets only inside the functions that make tensors or read
the Hub): ``tests/test_import_graph.py`` imports each module in a fresh interpreter and checks.
May import: ``errors``, ``io``, ``micro`` (the micro corpus, inside functions), ``probes.scoring``
(the held-out perplexity's log-probs, inside a function); never the rest of ``hybrid``, which
imports this.
"""
