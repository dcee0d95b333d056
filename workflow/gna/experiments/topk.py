"""Top-k removal's sizes and its positive control.

The computation layer of the top-k experiments ``topk_removal`` and ``arc_chat`` (the heads removed
are :mod:`gna.experiments.head_selection`'s, shared with the other head experiments).

The slides remove k = 10, 20, 30 of Llama-3.1-8B's 1,024 heads (1-3%). A model of another size
removes the same shares of its own heads (:func:`k_of_share`): k is the share times its heads,
rounded to the nearest whole head, halves up, and never 0 for a share above 0 (a removal of nothing
would be the unmodified model again). Qwen2.5-Coder-1.5B's 336 heads give k = 3, 7, 10;
SmolLM2-135M's 270 give 3, 5, 8.

The control (``kv_control``): each removal is also scored on the KV probe, on other prompts than
the ranking was made on (:func:`gna.probes.kv.probe_task_name`), so that a table whose other columns do not move can say
whether the removal hurt what the heads were ranked for.

One concept at three layers: this module sizes the removal and names its control, :mod:`gna.report.topk`
makes its tables, :mod:`gna.report.findings.topk` judges them.
"""
from __future__ import annotations

import math

from ..errors import ConfigError

def k_of_share(share: float, heads: int) -> int:
    """Heads a removal of ``share`` of ``heads`` takes: the nearest whole number (halves up), at least 1
    for a share above 0."""
    if not 0 <= share <= 1:
        raise ConfigError(f"topk_removal.k_shares: {share!r} is not a share of the heads (0 to 1)")
    if heads < 1:
        raise ConfigError(f"topk_removal.k_shares: a model with {heads} heads has none to remove")
    k = math.floor(share * heads + 0.5)
    return max(k, 1) if share > 0 else 0


def k_list(shares: list[float], heads: int | None, model: str) -> list[int]:
    """The k of each share for a model of ``heads`` heads, in order, each once (two shares that round to
    the same k are one removal)."""
    if heads is None:
        raise ConfigError(f"topk_removal.k_shares needs the number of heads of {model!r}: no config.json to "
                          "read it from (give k instead)")
    return list(dict.fromkeys(k_of_share(s, heads) for s in shares))



def removal(ranking, k: int, draw: str, kv_path: str | None, *, spec: dict, tasks: list[str], fields: dict,
            eval: dict, micro_data: str | None, kinds: list[str] | None = None, kv_probes: dict | None = None,
            finish, log):
    """One removal of rule topk_removal as a shared condition (:class:`gna.experiments.shared_conditions.Evaluation`):
    the ranking's top ``k`` heads, or with ``draw`` (``-random<seed>``) k heads drawn with that seed among the
    same kinds; with ``kinds`` k counts, and ranks among, those heads only (Zamba2's slide tables: attention).
    ``kv_probes`` (the control's task name -> None, ``kv_path`` its probe file): the KV probe scored beside
    the tasks."""
    from .head_selection import head_names, random_heads, top_heads
    from .shared_conditions import Evaluation

    if draw:
        heads = random_heads(ranking, k, int(draw.removeprefix("-random")), kinds=kinds)
    else:
        heads = top_heads(ranking, k, kinds=kinds)
    log.info("removing %d %s heads%s: %s", len(heads), "random" if draw else "top",
             f" ({'/'.join(kinds)} only)" if kinds else "", heads)
    kv = dict(kv_probes or {})
    return Evaluation(spec, tasks + list(kv), [{"ablate_heads": heads}],
                      {**eval, "kv_probes": {name: kv_path for name in kv}} if kv else eval, micro_data,
                      {**fields, "head_kinds": "/".join(kinds) if kinds else "all",
                       "n_heads": int(len(ranking) if not kinds else ranking.kind.isin(kinds).sum()),
                       "heads": head_names(heads, "none")},
                      finish=finish)
