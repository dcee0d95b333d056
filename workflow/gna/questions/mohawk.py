"""A ranking's top k as goombalab/mohawk's inputs, in the format of its own files.

mohawk keeps k teacher attention heads in a hybrid student in two places, both written by hand
there: ``configs/<family>/<size>/hybrid/architecture_<k>.yaml`` (the student's attention heads per
layer, one ``Blocks`` entry per run of consecutive layers with the same count, and a header comment
per layer such as ``# 8 = [16, 19, 20] -> 3``) and ``tools/hybrid_weights_transfer.py``, whose
``HEADS_BY_TEACHER`` lists ``(layer, head)`` in rank order (or ``--heads 9:25,4:4,...``); it keeps
the first ``num_heads`` of the list and copies each layer's heads in list order, asserting that the
student's layer has as many. :func:`export` writes both from a ranking, so they agree by construction.

The YAML carries the head counts (``MixerModel.Blocks``) and ``n_layer``; the teacher's other
settings (RoPE, vocabulary, ``${...}`` variables such as ``${BLOCK_NAME}``) come from mohawk's own
files for that teacher, which these blocks replace.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd

from ..errors import ConfigError
from ..scan import top_k


def read_ranking(path) -> pd.DataFrame:
    """A head ranking CSV (``gna scan``'s or the pipeline's ``ranking.csv``) with whole-number
    ``rank``, ``layer`` and ``head``; anything else is refused in one line naming the file, and the
    line of the first bad value."""
    if not Path(path).is_file():
        raise ConfigError(f"ranking {str(path)!r} does not exist")
    try:
        ranking = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:  # ValueError: not text
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"{path} is not a head ranking (a CSV with columns rank, layer, head, kind): "
                          f"{reason}") from None
    missing = {"rank", "layer", "head", "kind"} - set(ranking.columns)
    if missing:
        raise ConfigError(f"{str(path)!r} is not a head ranking: no column(s) {sorted(missing)}")
    for column in ("rank", "layer", "head"):
        numbers = pd.to_numeric(ranking[column], errors="coerce")
        bad = ranking.index[numbers.isna() | (numbers % 1 != 0) | (numbers < 0)]
        if len(bad):
            row = bad[0]
            raise ConfigError(f"{path} line {row + 2}: {column} {ranking[column][row]!r} is not a whole number "
                              f"(a head ranking's {column} column)")
        ranking[column] = numbers.astype(int)
    return ranking


def heads_for_mohawk(ranking: pd.DataFrame, k: int) -> list[tuple[int, int]]:
    """The top ``k`` attention heads as ``(layer, head)``, in rank order (mohawk's list order)."""
    if "attention" not in set(ranking.kind):
        raise ConfigError("mohawk keeps teacher attention heads; this ranking has none "
                          f"(kinds {sorted(set(ranking.kind))})")
    return [(l, h) for l, h, _ in top_k(ranking, k, kinds=["attention"])]


def heads_arg(heads) -> str:
    """``--heads`` of hybrid_weights_transfer.py: ``9:25,4:4,...``."""
    return ",".join(f"{l}:{h}" for l, h in heads)


def per_layer(heads, n_layers: int) -> dict[int, list[int]]:
    """{layer: its kept heads in list order} for every layer (empty lists included)."""
    if any(not 0 <= l < n_layers for l, _ in heads):
        raise ConfigError(f"a head's layer is outside the model's {n_layers} layers: {heads}")
    return {i: [h for l, h in heads if l == i] for i in range(n_layers)}


def architecture_yaml(heads, n_layers: int, head_dim: int, arch_name: str) -> str:
    """mohawk's ``architecture_<k>.yaml`` for ``heads``: header comments, ``ARCH_NAME``, and the
    ``ComponentsConfig.MixerModel`` blocks of consecutive layers with equal head counts."""
    layers = per_layer(heads, n_layers)
    lines = [f"# {l} = {sorted(hs)} -> {len(hs)}" for l, hs in layers.items() if hs]
    lines += ["", f"ARCH_NAME: {arch_name}", "", "ComponentsConfig:", "  MixerModel:", "    input:",
              f"      n_layer: {n_layers}", "    Blocks:"]
    for count, run in itertools.groupby(range(n_layers), key=lambda i: len(layers[i])):
        run = list(run)
        span = f"L{run[0]}" if len(run) == 1 else f"L{run[0]}-L{run[-1]}"
        lines += ["    - name: ${BLOCK_NAME}", f"      n_layers: {len(run)}", "      input: ${BLOCK_INPUT}",
                  "      ssm_layer:", "        name: ${SSM_MIXER}", "        input: ${SSM_INPUT}",
                  "      attn_layer:", "        name: LlamaAttention", "        input:",
                  f"          num_attention_heads: {count} # {span}", "          attention_bias: ${ATTN_BIAS}",
                  f"          head_dim: {head_dim}", ""]
    return "\n".join(lines)


def export(ranking: pd.DataFrame, k: int, n_layers: int, head_dim: int, arch_name: str) -> dict[str, str]:
    """``{"architecture_<k>.yaml": text, "heads_<k>.txt": the --heads argument}`` for the top ``k``."""
    heads = heads_for_mohawk(ranking, k)
    return {f"architecture_{k}.yaml": architecture_yaml(heads, n_layers, head_dim, f"{arch_name}-ARCH{k}"),
            f"heads_{k}.txt": heads_arg(heads) + "\n"}


def model_head_dim(source: str) -> int:
    """The attention head width of a model (its config.json, local or shipped): ``head_dim``, else
    hidden_size / num_attention_heads."""
    from ..config.architectures import config_of

    cfg = config_of(source)
    if not cfg or not (cfg.get("head_dim") or (cfg.get("hidden_size") and cfg.get("num_attention_heads"))):
        raise ConfigError(f"no attention head width in the config of {source!r}: set mohawk_export.head_dim")
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
