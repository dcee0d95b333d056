"""The confirmation stage of a sampled study: the screen (the study's own sizes) picks, by a rule the
config writes before anything runs, the conditions each claim is judged on; those conditions and their
references are scored again on fresh items, disjoint from the screen's, sized by power at the
discordance the screen measured; the verdicts come from the fresh items only.

- :mod:`.samples`: the fresh items (MMLU, the local suite's tasks), drawn from what the screen left, in
  a seeded random order so that the first ``n`` of them are a simple random sample of the rest;
- :mod:`.parts`: a condition, a part, the lines and paper effects a part is read against;
- :mod:`.sizing`: the items a paired part needs (Connor's McNemar n at the screen's discordance, against
  the distance from the claim's line to the paper's scaled effect) and the CPU seconds they cost;
- :mod:`.pick`: the rule (which conditions, which parts, their n, the budget spent in the paper's order);
- :mod:`.screen`: the screen as the pick reads it, from the screen's files;
- :mod:`.fresh_answers`: a claim's conditions scored on the fresh items (the confirm job);
- :mod:`.judge`: each picked part's verdict from the confirmation's answers; :mod:`.report` its words;
- :mod:`.budget`: what the caps could cost at most, checked before anything runs.

May import: ``errors``, ``io``, ``evaluation``, ``report`` (the verdict rule and the paper's effects),
``experiments`` (Table 1's kept heads, as the screen's job keeps them; an evaluation's rows), ``probes``
(the KV probes' task names).
"""
