"""The CI harness: a job spec derived from the project's own workflow file.

Reads GitHub Actions workflows and job logs; imports no other room.
"""
