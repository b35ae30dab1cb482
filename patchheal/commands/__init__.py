"""One module per CLI command (or command group), loaded only when invoked."""
