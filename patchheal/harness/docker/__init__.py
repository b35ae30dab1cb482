"""The Docker harness: each run an exec in a sandboxed container over the worktree.

Assembles the rooms below it (engine, images, setup, results) into one
`Harness`. Never imports `compose`, `ci` or `inference`.
"""
