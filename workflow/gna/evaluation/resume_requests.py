"""lm-eval's requests in units kept as each finishes, so that a stopped evaluation resumes from them.

lm-eval's own cache (``use_cache``: ``CachingLM`` and ``CacheHook.add_partial``) keeps each answer as
its request finishes and sends a resumed run only the requests it lacks; ``HFLM`` then batches
those anew, so a request can share its batch (and its padded length) with other requests than in
an uninterrupted run, and its log-probability can differ in the last bits. Its answers are also
keyed by the request's text alone, not by the model or the intervention that produced them.

Here :func:`keeping_finished` cuts the requests into units fixed by the requests alone (a run
stopped or not cuts them the same way), runs each unit through the model's own
``_loglikelihood_tokens`` or ``generate_until`` as one call, and keeps the unit's answers (exact
floats, pickled) in the running job's partial state (:mod:`gna.resume.store`), under a digest of
the unit's tokens in a section of the evaluation's own settings. A unit is ``batch_size`` distinct
contexts (multiple-choice requests sharing a context stay together, as lm-eval's one-token lookup
and :mod:`.shared_prefix` batch them) or ``batch_size`` generations of one ``gen_kwargs``. Rolling
log-likelihoods reach the model through ``_loglikelihood_tokens`` and are kept there; sampled
generations (``do_sample``) are never kept.
"""
from __future__ import annotations

import functools
import json

from ..resume.store import fingerprint


def _rows(lm) -> int:
    return int(lm.batch_size) if str(lm.batch_size).isdigit() else 8


@functools.cache
def keeping_finished(base: type) -> type:
    """``base`` (lm-eval's ``HFLM`` or a subclass) keeping each finished unit of requests in
    ``self.partial`` (a :class:`gna.resume.store.Section`; ``None``: plain ``base``)."""

    class KeepingFinished(base):
        partial = None

        def _run_units(self, units, kind: str, run, disable_tqdm: bool):
            from tqdm import tqdm

            out = {}
            for unit in tqdm(units, disable=disable_tqdm or self.rank != 0, desc=f"{kind} (units kept)"):
                key = fingerprint([kind, [what for _, _, what in unit]])
                got = self.partial.get(key)
                if got is None:
                    got = list(run([r for _, r, _ in unit]))
                    self.partial.put(key, got)
                out.update(zip((i for i, _, _ in unit), got))
            return [out[i] for i in range(len(out))]

        def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
            if self.partial is None:
                return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)
            by_context: dict[tuple, list] = {}
            for i, r in enumerate(requests):
                by_context.setdefault(tuple(r[1]), []).append((i, r))
            # longest first, as lm-eval orders them; the tokens break ties, so the order is the requests' own
            groups = sorted(by_context.values(), key=lambda g: (-max(len(r[1]) + len(r[2]) for _, r in g),
                                                                 [list(r[1]) + list(r[2]) for _, r in g]))
            n = _rows(self)
            units = [[m for g in groups[s:s + n] for m in g] for s in range(0, len(groups), n)]

            def run(reqs):
                return super(KeepingFinished, self)._loglikelihood_tokens(reqs, disable_tqdm=True,
                                                                          override_bs=override_bs)
            # a unit's key: its requests' texts and tokens (what the model saw)
            return self._run_units([[(i, r, [r[0], list(r[1]), list(r[2])]) for i, r in u] for u in units],
                                   "loglikelihood", run, disable_tqdm)

        def generate_until(self, requests, disable_tqdm: bool = False):
            if self.partial is None or any(r.args[1].get("do_sample", False) for r in requests):
                return super().generate_until(requests, disable_tqdm=disable_tqdm)
            order = sorted(range(len(requests)), key=lambda i: (
                json.dumps(requests[i].args[1], sort_keys=True, default=str), -len(requests[i].args[0]),
                requests[i].args[0]))
            n, units = _rows(self), []
            for i in order:
                kwargs = json.dumps(requests[i].args[1], sort_keys=True, default=str)
                if units and len(units[-1]) < n and units[-1][0][2] == kwargs:
                    units[-1].append((i, requests[i], kwargs))
                else:
                    units.append([(i, requests[i], kwargs)])

            def run(reqs):
                return super(KeepingFinished, self).generate_until(reqs, disable_tqdm=True)
            return self._run_units([[(i, r, [r.args[0], kwargs]) for i, r, kwargs in u] for u in units],
                                   "generate_until", run, disable_tqdm)

    KeepingFinished.__qualname__ = KeepingFinished.__name__ = f"KeepingFinished{base.__name__}"
    return KeepingFinished
