"""Hidden suite of assignment 05: encoder and decoder."""
