"""Failure intelligence: scrub -> parse -> normalize -> fingerprint -> classify."""
