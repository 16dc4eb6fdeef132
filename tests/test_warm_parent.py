"""The collector while a warm parent starts: paused, then what was made is frozen."""

from __future__ import annotations

import gc

import pytest

from grader.sandbox.warm_parent import starting


@pytest.fixture
def collector():
    """This process's collector as it was, once the test is done."""
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_no_collection_while_starting_and_what_it_made_is_left_out_of_later_ones(collector):
    gc.enable()
    gc.unfreeze()
    with starting():
        assert not gc.isenabled()
        made = [[] for _ in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)  # frozen: no later collection scans (or copies) them


def test_a_collector_that_was_off_stays_off_and_one_that_was_on_comes_back_after_a_failure(collector):
    gc.disable()
    with starting():
        pass
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(ImportError), starting():
        raise ImportError("a module that failed to import")
    assert gc.isenabled()
