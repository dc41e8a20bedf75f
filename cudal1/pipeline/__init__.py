"""Training stages (sft, self_train, contrastive_rl), the optimize loop, and their per-step metrics."""
