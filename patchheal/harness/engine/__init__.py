"""The Docker engine and the sandbox every step container gets.

Owns the connection to the engine and its retried calls (`dockerapi`), what
patchheal labels and names as its own (`ownership`), container lifecycle and
output (`containers`, `outputpump`), the sandbox's settings and limits
(`sandbox`, `treesize`, `gitmeta`), the long-lived sandbox session (`session`),
host directories a container reads (`hostdirs`), and the clean-up of what runs
leave behind (`sweep`, `leftovers`, `orphans`). The lowest room: imports only
the shared words (`harness.base`, `harness.config`) and nothing else of harness.
"""
