"""What the SFT and GRPO stages share: model and tokenizer loading, loss masks, metrics logging."""
