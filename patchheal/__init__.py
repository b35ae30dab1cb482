"""patchheal: heal failing CI and pipeline jobs in a closed loop.

Importing the package has no side effects; heavy dependencies (the Docker SDK,
SQLModel, an HTTP client) load only inside the commands that need them.
"""

__version__ = "0.1.0"
