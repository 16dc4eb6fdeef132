"""Hidden suite of assignment 07: A GPT from scratch (decoder-only)."""
