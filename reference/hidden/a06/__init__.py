"""Hidden suite of assignment 06: training for translation."""
