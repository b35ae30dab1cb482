"""The verdict: whether a captured run passed, cross-checked against its baseline."""
