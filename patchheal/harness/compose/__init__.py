"""The compose harness: a step that needs services, on the Docker SDK.

The subset of the compose file format patchheal runs (`file`) and the harness
that starts the services on a private network beside the Docker harness's step
container (`harness`). May import every room below it, `docker` included.
"""
