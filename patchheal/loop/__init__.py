"""The controller: a job's steps, each step's attempts, budgets, resets and stops."""
