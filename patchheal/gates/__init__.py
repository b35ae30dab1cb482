"""Gates a candidate passes before it runs: policy (safety, test and runner tampering)."""
