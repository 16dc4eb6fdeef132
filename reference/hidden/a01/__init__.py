"""Hidden suite of assignment 01: attention from scratch."""
