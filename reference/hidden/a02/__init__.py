"""Hidden suite of assignment 02: masks and dropout."""
