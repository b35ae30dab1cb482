"""Intake: what a job spec must be before it is validated, and the reference of its keys.

`rawspec.py` bounds the raw TOML (size, nesting, NUL bytes, path lengths, file
kinds) so that no malformed spec reaches pydantic, the file system or git in a
shape that crashes or hangs; `specdoc.py` renders docs/job-spec.md from the
spec models, so the reference cannot drift from what is accepted.
"""
