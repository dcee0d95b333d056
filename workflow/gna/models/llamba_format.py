"""The Llamba / discrete Mamba-2 published ``config.json`` format, told from its fields: a leaf
module (no torch, no transformers), so the config checks and both the adapter
(:mod:`gna.models.adapters.llamba`) and the implementation (:mod:`gna.models.llamba`) share one test
without importing each other.
"""


def is_llamba_config(config: dict) -> bool:
    """Whether a ``config.json`` dict is in the Llamba / discrete Mamba-2 published format.

    ``model_type == "llamba"`` suffices; otherwise the fields decide (cartesia-ai's own config.json
    files name no model_type): ``d_model``, ``n_layer``, an ``mlp_cfg`` and an ``ssm_cfg`` naming
    ``n_v_heads``/``n_qk_heads`` (mamba_ssm's own configs have ``ssm_cfg`` but neither ``mlp_cfg``
    nor qk/v heads).
    """
    if not isinstance(config, dict):
        return False
    if config.get("model_type") == "llamba":
        return True
    ssm, mlp = config.get("ssm_cfg"), config.get("mlp_cfg")
    return (all(k in config for k in ("d_model", "n_layer", "vocab_size"))
            and isinstance(ssm, dict) and ("n_v_heads" in ssm or "n_qk_heads" in ssm)
            and isinstance(mlp, dict) and "intermediate_size" in mlp)
