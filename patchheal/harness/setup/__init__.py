"""A job's dependencies: resolved on the host, installed in a container, committed once.

Owns the wheelhouse on the host (what a pip line asks for, downloaded with no
code run), the dependency image keyed by its fingerprint (`deps`), what setup
reads (`sources`, `metadata`, `scmversion`, and `lockedpytest`: the pytest a
lock file pins) and what it leaves in the tree (`generated`). May import
`engine`, `results` and `images`.
"""
