"""The job's private repository, worktrees, patch application and diffs."""
