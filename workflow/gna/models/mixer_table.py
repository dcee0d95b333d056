"""A model's token mixers as a text table: ``gna describe``'s output."""
from __future__ import annotations


def _text_table(rows: list[dict]) -> str:
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(width[c]) for c in cols) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def describe_table(model) -> str:
    """The mixers of ``model`` as a text table, one row per mixer (Zamba2: per invocation)."""
    from .adapters import adapter_for

    adapter = adapter_for(model)
    desc = adapter.describe()
    cfg = model.config
    arch = (getattr(cfg, "architectures", None) or [type(model).__name__])[0]
    head = (f"{arch} (model_type {getattr(cfg, 'model_type', '?')}), adapter {adapter.family}: "
            f"{desc.n_layers} layers, {len(desc.mixers)} mixers, {desc.n_heads_total} heads")
    rows = [{"layer": m.layer, "kind": m.kind, "n_heads": m.n_heads, "head_dim": m.head_dim,
             "kv_heads": "-" if m.kv_heads is None else m.kv_heads,
             "heads_per_kv": "-" if m.kv_group is None else m.kv_group,
             "heads_live_in (input of)": m.out_proj_path or "?"} for m in desc.mixers]
    return head + "\n" + _text_table(rows)
