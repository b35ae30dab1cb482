"""What a repository says about its runtime, and which harness it needs.

Owns the runtime tables (`runtimes`), what a repository's files say about its
Python and Node at the failing commit (`pythonsource`, `nodesource`), the choice
they lead to (`pythons`, `nodes`), and which harness kind a repository needs
(`kind`). May import every room below it; only `registry` imports it.
"""
