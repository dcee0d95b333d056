"""Tables and figures: one module per paper figure or table, ours beside the published numbers."""
