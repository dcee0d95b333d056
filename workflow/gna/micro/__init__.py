"""The micro study: a synthetic world, its tokenizer, and the training of tiny models."""
