"""The intervention vocabulary is one table (gna.interventions.vocabulary.KINDS): a kind that lacks how
it applies, where it first changes the model or how it is named is refused when it is built, and every
kind of the table gives the labels, first changed layers and model outputs the if-chains gave."""
from contextlib import ExitStack

import pytest
import torch

from gna.errors import ConfigError
from gna.interventions import ablate_heads, drop_layer, keep_heads, mask_last_row, truncate
from gna.interventions.vocabulary import KINDS, Kind, applied, first_changed_layer, label, register

N_LAYERS = 3
IDS = torch.tensor([[1, 5, 9, 4, 17, 33, 4, 60, 8, 12, 4, 21, 3, 7]])


def nothing(stack, model, arg):
    return None


# Per kind: (arg, its label, its first changed layer of N_LAYERS, its direct context managers), as the
# if-chains of the vocabulary before it was a table gave them.
EXAMPLES = {
    "truncate": [(2, "truncate=2", 2, lambda m: [truncate(m, 2)]),
                 (3, "truncate=3", 3, lambda m: [truncate(m, 3)])],
    "drop_layer": [(1, "drop_layer=1", 1, lambda m: [drop_layer(m, 1)])],
    "ablate_heads": [([[2, 1], [1, 0, "attention"]], "ablate=L2H1,L1H0", 1,
                      lambda m: [ablate_heads(m, [(2, 1), (1, 0, "attention")])]),
                     ([], "ablate=none", N_LAYERS, lambda m: [])],
    "keep_heads": [({"layer": 2, "heads": [0, 1]}, "keep=L2:0/1", 2, lambda m: [keep_heads(m, 2, [0, 1], None)]),
                   ([{"layer": 1, "heads": []}, {"layer": 2, "heads": [3], "kind": "attention"}],
                    "keep=L1:none,L2:3", 1,
                    lambda m: [keep_heads(m, 1, [], None), keep_heads(m, 2, [3], "attention")])],
    "mask_last_row": [("all", "last_row=all", 0, lambda m: [mask_last_row(m, "all")]),
                      ([[2, 0]], "last_row=L2H0", 2, lambda m: [mask_last_row(m, [(2, 0)])]),
                      ([], "last_row=none", N_LAYERS, lambda m: [])],
}


def test_every_kind_of_the_table_has_examples_here():
    assert set(KINDS) == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_kind_labels_and_finds_its_first_layer_as_before(name):
    for arg, named, first, _ in EXAMPLES[name]:
        assert label([{name: arg}]) == named
        assert first_changed_layer([{name: arg}], N_LAYERS) == first


def test_a_list_joins_its_labels_and_takes_the_lowest_layer():
    specs = [{"truncate": 3}, {"ablate_heads": [[2, 1]]}, {"drop_layer": 1}]
    assert label(specs) == "truncate=3+ablate=L2H1+drop_layer=1"
    assert first_changed_layer(specs, N_LAYERS) == 1
    assert label([]) == label(None) == "none" and first_changed_layer([], N_LAYERS) == N_LAYERS


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_kind_applies_as_its_context_managers(tiny_model, name):
    model, _ = tiny_model("llama", layers=N_LAYERS)
    for arg, _, _, direct in EXAMPLES[name]:
        with torch.no_grad():
            with ExitStack() as stack:
                for cm in direct(model):
                    stack.enter_context(cm)
                want = model(input_ids=IDS, use_cache=False).logits
            with applied(model, [{name: arg}]):
                got = model(input_ids=IDS, use_cache=False).logits
        assert torch.equal(want, got), (name, arg)


def test_a_kind_missing_one_of_its_three_is_refused_when_built():
    with pytest.raises(TypeError):
        Kind(apply=nothing, first_layer=lambda arg, n: n)      # no label
    for missing in ("apply", "first_layer", "label"):
        parts = {**dict(apply=nothing, first_layer=lambda arg, n: n, label=str), missing: None}
        with pytest.raises(TypeError, match=missing):
            Kind(**parts)


def test_register_refuses_a_taken_name_and_anything_but_a_kind():
    with pytest.raises(ValueError, match="twice"):
        register("truncate", Kind(apply=nothing, first_layer=lambda arg, n: n, label=str))
    with pytest.raises(TypeError):
        register("new_kind", {"apply": nothing})
    assert "new_kind" not in KINDS


def test_a_spec_not_in_the_table_is_refused_before_anything_applies():
    with pytest.raises(ConfigError, match="one-key mapping"):
        label([{"prune": 3}])
