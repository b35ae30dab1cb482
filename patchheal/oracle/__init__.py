"""Impossible twins of the protected tests: ImpossibleBench's conflicting tests as a verifier.

A candidate that passes is run once more with each originally failing test
made impossible (one top-level assertion's expected value replaced, or the
assertion negated). Pure code, no
I/O: `testids` maps a test id to where its function is defined, `assertions`
rewrites one assertion on its own lines, `mutate` builds a test file's twin.
The run lives in `loop/twins.py`, the twin's judgement in `verdict/twin.py`
(docs/verdict.md, "Impossible twins").
"""
