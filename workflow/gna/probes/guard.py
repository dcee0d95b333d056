"""Does the probe mean anything for this model? Checked before heads are ranked on it.

A ranking by accuracy drop is noise when the full model cannot do the probe: its baseline sits
at chance (1 / choices), or its tokenizer maps the probe's words to the unknown token (the paper's
English-keyed prompts through the micro models' word-level tokenizer: 31 of 53 tokens ``<unk>``,
baseline 0.050 = chance at 20 pairs). :func:`check_probe` measures both, and unless forced,
stops with a :class:`~gna.errors.ProbeError` that says what is wrong and what to do; its
:meth:`ProbeCheck.columns` go into the ranking table, so a forced run is visible in the output.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ProbeError

DEFAULTS = {"max_unknown_share": 0.05, "min_over_chance": 0.05, "force": False}
"""The schema's defaults of ``scan.probe_check`` (tests/test_probe_guard.py checks they agree)."""

ADVICE = ("use a probe the model can read and solve: --format compact (pipeline: kv_probe.format), another "
          "separator (--separator / kv_probe.separator), more pairs (--pairs / scan.n_pairs: chance is 1 / pairs) "
          "or fewer if the model fails at many, or a model that can do the task; --force (scan.probe_check.force: "
          "true) ranks anyway")


KEEP_PAPER = ("the compact format (k197 5 ... k215 ?) is the micro models' own, read by their word-level tokenizer; "
              "a pretrained model reads the paper's: keep --format paper, the default (pipeline: kv_probe.format: "
              "paper); else another separator (--separator / kv_probe.separator), fewer pairs (--pairs / "
              "scan.n_pairs), or a model that can do the task; --force (scan.probe_check.force: true) ranks anyway")
"""The advice where the compact format fails on a tokenizer that reads the paper's words (no unknown token
among them): the compact format is right only for the micro models."""


def advice(result: "ProbeCheck", fmt: str | None = None) -> str:
    """What to do about a failed check: keep the paper's format where the compact one failed on a
    tokenizer that has no unknown tokens in it (a pretrained one), else :data:`ADVICE`."""
    if fmt == "compact" and result.unknown_share <= result.max_unknown_share:
        return KEEP_PAPER
    return ADVICE


@dataclass
class ProbeCheck:
    unknown_share: float      # share of the prompts' tokens that are the tokenizer's unknown token
    baseline_accuracy: float  # the unmodified model's accuracy on the probe
    chance_accuracy: float    # 1 / choices
    max_unknown_share: float
    min_over_chance: float    # the baseline must beat chance by at least this (accuracy points)
    forced: bool = False
    baseline: object = field(default=None, repr=False)  # the ProbeScore measured (the scan reuses it)

    def problems(self) -> list[str]:
        out = []
        if self.unknown_share > self.max_unknown_share:
            out.append(f"{self.unknown_share:.0%} of the prompts' tokens are the tokenizer's unknown token "
                       f"(limit {self.max_unknown_share:.0%})")
        if self.baseline_accuracy < self.chance_accuracy + self.min_over_chance:
            out.append(f"the model's baseline accuracy {self.baseline_accuracy:.3f} is not above chance "
                       f"{self.chance_accuracy:.3f} by {self.min_over_chance} (a ranking would rank noise)")
        return out

    def columns(self) -> dict:
        """The ranking table's record of the check: its measures, thresholds and outcome."""
        verdict = "forced" if self.problems() and self.forced else "passed"
        return {"unknown_share": self.unknown_share, "chance_accuracy": self.chance_accuracy,
                "probe_check": verdict, "max_unknown_share": self.max_unknown_share,
                "min_over_chance": self.min_over_chance}


def unknown_share(encoded, tokenizer) -> float:
    """Share of the prompts' tokens (``encoded.prompt_ids``) that are ``tokenizer``'s unknown token
    (0 for tokenizers without one, such as byte-level BPE)."""
    unk = tokenizer.unk_token_id
    total = sum(len(p) for p in encoded.prompt_ids)
    if unk is None or total == 0:
        return 0.0
    return sum(t == unk for p in encoded.prompt_ids for t in p) / total


def check_probe(model, tokenizer, encoded, batch_size: int = 32, max_unknown_share: float = 0.05,
                min_over_chance: float = 0.05, force: bool = False, what: str = "the probe",
                fmt: str | None = None) -> ProbeCheck:
    """Measure the probe against the model (one forward of the unmodified model per batch) and
    raise a ProbeError naming every problem and the remedies (:func:`advice`; ``fmt``: the probe's
    format), unless ``force``."""
    from .scoring import score

    baseline = score(model, encoded, batch_size=batch_size)
    result = ProbeCheck(unknown_share=unknown_share(encoded, tokenizer), baseline_accuracy=baseline.accuracy,
                        baseline=baseline,
                        chance_accuracy=1 / encoded.n_choices, max_unknown_share=max_unknown_share,
                        min_over_chance=min_over_chance, forced=force)
    problems = result.problems()
    if problems and not force:
        raise ProbeError(f"{what} means nothing for this model: {'; '.join(problems)}. {advice(result, fmt)}")
    return result
