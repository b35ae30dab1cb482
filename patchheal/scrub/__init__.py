"""The one secret scrubber every write path uses, and its rule table."""
