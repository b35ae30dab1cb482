"""Harnesses: where a step runs.

The top of this package holds the words every room shares and the roof that
chooses: `base` (the Harness Protocol), `config` (a harness definition's typed
form), `definitions` (where definitions are found) and `registry` (which harness
a job gets, and why). The rest lives in rooms, lowest first; a room imports its
own modules, the rooms below it and the shared words, never a room above it
(tests/test_structure.py checks this):

1. `engine`: the Docker engine, containers and the sandbox every step gets.
2. `results` and `images`: what a step wrote, read as untrusted; harness images.
3. `setup`: a job's dependencies, installed once and committed as an image.
4. `docker`, `local`, `ci`: the harness kinds a step runs in (`ci`: derived from a workflow).
5. `compose`: a step with services (the Docker harness plus a network of service containers).
6. `inference`: what a repository says about its runtime, and which harness it needs.

docs/architecture.md draws the house; docs/harnesses.md follows the same rooms.
"""
