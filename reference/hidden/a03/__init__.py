"""Hidden suite of assignment 03: multi-head attention."""
