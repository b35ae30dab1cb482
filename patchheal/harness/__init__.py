"""Harnesses: where a step runs. See base.py for the Protocol."""
