"""Dimensions, reference modules and this suite's own fixtures for the 07 suite.

The grading plugin serves `student`, `device`, `make_input` and `input_scale` to every
suite (see grader.suite): override `input_scale` here if the values need larger inputs.
"""
