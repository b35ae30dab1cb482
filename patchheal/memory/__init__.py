"""The attempt store: SQLModel tables and the queries the loop needs."""
