"""lm-eval's requests in units kept as each finishes, so that a stopped evaluation resumes from them.

lm-eval's own cache (``use_cache``: ``CachingLM`` and ``CacheHook.add_partial``) keeps each answer as
its request finishes and sends a resumed run only the requests it lacks; ``HFLM`` then batches
those anew, so a request can share its batch (and its padded length) with other requests than in
an uninterrupted run, and its log-probability can differ in the last bits. Its answers are also
keyed by the request's text alone, not by the model or the intervention that produced them.

Here :func:`keeping_finished` cuts the requests into units fixed by the requests alone (a run
stopped or not cuts them the same way): lm-eval's own batches (``HFLM``'s order, longest first, and
its grouping of one-token continuations of a context; with :mod:`.shared_prefix`, ``batch_size``
whole contexts), each run through the parent's ``_loglikelihood_tokens`` or ``generate_until`` as
one call, which batches it as it would have in one call for all: the same answers as without
units, to the bit. A unit's answers (exact floats, pickled) are kept in the running job's partial
state (:mod:`gna.resume.store`) under a digest of its texts and tokens, in a section of the
evaluation's own settings, with the CPU seconds it took: a resumed job counts what its units cost in
every run (:func:`gna.resume.store.reused_cost`). Rolling log-likelihoods reach the model through
``_loglikelihood_tokens`` and are kept there; sampled generations (``do_sample``) are never kept.
"""
from __future__ import annotations

import functools

from ..resume.store import fingerprint
from .shared_prefix import shareable


def _rows(lm) -> int:
    return int(lm.batch_size) if str(lm.batch_size).isdigit() else 8


def _chunked(items: list, n: int) -> list[list]:
    return [items[s:s + n] for s in range(0, len(items), n)]


class KeepingUnits:
    """The methods :func:`keeping_finished` mixes in before lm-eval's ``HFLM``: requests run in units,
    each kept in ``self.partial`` as it finishes (``None``: the base's own path)."""

    partial = None

    def _run_units(self, units, kind: str, run, disable_tqdm: bool):
        from tqdm import tqdm

        out = {}
        for unit in tqdm(units, disable=disable_tqdm or self.rank != 0, desc=f"{kind} (units kept)"):
            key = fingerprint([kind, [what for _, _, what in unit]])
            got = self.partial.kept(key, lambda: list(run([r for _, r, _ in unit])))
            out.update(zip((i for i, _, _ in unit), got))
        return [out[i] for i in range(len(out))]

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
        if self.partial is None:
            return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)

        def run(reqs):
            return super(KeepingUnits, self)._loglikelihood_tokens(reqs, disable_tqdm=True,
                                                                      override_bs=override_bs)
        # a unit's key: its requests' texts and tokens (what the model saw)
        units = [[(i, requests[i], [requests[i][0], list(requests[i][1]), list(requests[i][2])]) for i in u]
                 for u in self._loglikelihood_units(requests)]
        return self._run_units(units, "loglikelihood", run, disable_tqdm)

    def _loglikelihood_units(self, requests) -> list[list[int]]:
        """Request indices per unit: lm-eval's own batches, whose requests the parent, given one
        unit, batches as it would in one call for all (the same rows, padded alike); with
        contexts shared (:mod:`.shared_prefix`), ``batch_size`` whole contexts."""
        n = _rows(self)

        def longest_first(i):  # HFLM's order: longest first, the tokens breaking ties
            toks = list(requests[i][1]) + list(requests[i][2])
            return -len(toks), tuple(toks)

        if getattr(self, "_score_context", None) is not None and shareable(self.model):
            def key(i):
                return tuple(requests[i][1])
        elif self.backend == "causal" and self.logits_cache:  # HFLM's one-token lookup groups
            def key(i):
                return tuple(list(requests[i][1]) + list(requests[i][2])[:-1])
        else:
            return _chunked(sorted(range(len(requests)), key=longest_first), n)
        groups: dict[tuple, list[int]] = {}
        for i in range(len(requests)):
            groups.setdefault(key(i), []).append(i)
        # a group runs as its longest continuation (the first of them, as HFLM's Collator takes it)
        reps = sorted((max(g, key=lambda i: len(requests[i][2])) for g in groups.values()), key=longest_first)
        return [sorted(m for rep in chunk for m in groups[key(rep)]) for chunk in _chunked(reps, n)]

    def generate_until(self, requests, disable_tqdm: bool = False):
        if self.partial is None or any(r.args[1].get("do_sample", False) for r in requests):
            return super().generate_until(requests, disable_tqdm=disable_tqdm)
        from lm_eval.models.utils import Collator

        # HFLM's own batches: per gen_kwargs, longest context first, batch_size at a time
        order = Collator(list(range(len(requests))), group_by="gen_kwargs", group_fn=lambda i: requests[i].args[1],
                         sort_fn=lambda i: (-len(self.tok_encode(requests[i].args[0])), requests[i].args[0]))

        def run(reqs):
            return super(KeepingUnits, self).generate_until(reqs, disable_tqdm=True)
        units = [[(i, requests[i], [requests[i].args[0], requests[i].args[1]]) for i in sorted(u)]
                 for u in order.get_batched(n=_rows(self))]
        return self._run_units(units, "generate_until", run, disable_tqdm)


@functools.cache
def keeping_finished(base: type) -> type:
    """``base`` (lm-eval's ``HFLM`` or a subclass) keeping each finished unit of requests in
    ``self.partial`` (a :class:`gna.resume.store.Section`; ``None``: plain ``base``)."""

    class KeepingFinished(KeepingUnits, base):
        pass

    KeepingFinished.__qualname__ = KeepingFinished.__name__ = f"KeepingFinished{base.__name__}"
    return KeepingFinished
