"""Batch evaluation: a suite of programs, one rollout each, results files (``cwmtui eval``)."""
