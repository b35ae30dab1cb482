"""compose."""
