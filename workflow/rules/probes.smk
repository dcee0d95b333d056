# Probe sets: the KV-retrieval dictionary prompts (paper section 4).


rule kv_probe:
    output:
        "results/probes/kv-{fmt}-n{n_pairs}-s{seed}.examples.jsonl",
    wildcard_constraints:
        fmt="paper|compact",
        n_pairs=r"\d+",
        seed=r"\d+",
    params:
        n_examples=config["kv_probe"]["n_examples"],
        separator=config["kv_probe"].get("separator", " "),
    log:
        "logs/probes/kv-{fmt}-n{n_pairs}-s{seed}.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../scripts/kv_probe.py"
