"""images."""
