"""Proposers: what writes candidate patches. See base.py for the Protocol."""
