"""A submission's source as the trusted side reads it, parsed and never run: the constructs that
look evasive, and the report's flags. None of it ships to students (``grade release`` refuses).
"""
