"""The local harness: the step as a host process in the worktree, in its own venv.

May import `results` (the collectors and the channel) and `setup` (what a
dependency file is); never the Docker harness or the rooms above it.
"""
