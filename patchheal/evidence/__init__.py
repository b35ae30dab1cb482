"""What a proposer is shown: the compact retry context, within a token budget."""
