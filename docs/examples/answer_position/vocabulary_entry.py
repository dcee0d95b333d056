# ablate_heads' zeroing at each row's answer position only (gna.experiments.answer_position)
register("ablate_at_answer", Kind(
    apply=lambda stack, model, heads: stack.enter_context(
        mask_head_rows(model, _heads(heads), stack.enter_context(answer_rows(model)))),
    first_layer=_lowest_head_layer,
    label=lambda heads: "ablate_at_answer=" + _heads_label(heads)))
