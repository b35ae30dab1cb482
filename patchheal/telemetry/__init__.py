"""The append-only event log and StatsD metrics."""
