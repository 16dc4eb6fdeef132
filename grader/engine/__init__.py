"""Grading: the library call, its options, a suite run in a trusted process, the pytest plugin
that turns tests into parts, a whole class (local or Ray), and the public tests' data made from
the reference. The only layer, with ``sandbox`` and ``suite``, that imports torch.
"""
