# Probe sets: the KV-retrieval dictionary prompts (paper section 4). The file name carries the
# separator between "is" and the value: `nosep` ("...is42", the G&A code) or `space` ("is 42",
# the follow-up's mohawk); it changes the context the value is scored in, so it can move ranks.
# Values other than the paper's 0-99 add their rule (gna.probes.values): `nosep-v10-99` draws two-digit
# values, for the models whose tokenizer would make one value a prefix of another (kv_values).


rule kv_probe:
    output:
        "results/probes/kv-{fmt}-n{n_pairs}-s{seed}-{sep}{values_tag}.examples.jsonl",
    wildcard_constraints:
        fmt="paper|compact",
        n_pairs=r"\d+",
        seed=r"\d+",
        sep="space|nosep",
        values_tag="|".join(re.escape(rule_tag(r)) for r in VALUE_RULES),
    params:
        n_examples=config["kv_probe"]["n_examples"],
        separator=lambda wc: SEPARATORS[wc.sep],
    log:
        "logs/probes/kv-{fmt}-n{n_pairs}-s{seed}-{sep}{values_tag}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/kv_probe.py"
