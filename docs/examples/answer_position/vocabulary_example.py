    # without padding the answer position is each row's last token, where mask_last_row masks
    "ablate_at_answer": [([[2, 1]], "ablate_at_answer=L2H1", 2, lambda m: [mask_last_row(m, [(2, 1)])]),
                         ([], "ablate_at_answer=none", N_LAYERS, lambda m: [])],
