# Probe sets: the KV-retrieval dictionary prompts (paper section 4). The file name carries the
# separator between "is" and the value: `nosep` ("...is42", the G&A code) or `space` ("is 42",
# the follow-up's mohawk); it changes the context the value is scored in, so it can move ranks.


rule kv_probe:
    output:
        "results/probes/kv-{fmt}-n{n_pairs}-s{seed}-{sep}.examples.jsonl",
    wildcard_constraints:
        fmt="paper|compact",
        n_pairs=r"\d+",
        seed=r"\d+",
        sep="space|nosep",
    params:
        n_examples=config["kv_probe"]["n_examples"],
        separator=lambda wc: SEPARATORS[wc.sep],
    log:
        "logs/probes/kv-{fmt}-n{n_pairs}-s{seed}-{sep}.log",
    conda:
        CPU_ENV
    script:
        "../scripts/kv_probe.py"
