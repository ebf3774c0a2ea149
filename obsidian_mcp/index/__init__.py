"""The server's own sense of meaning: an embedding model, and the index that keeps passages
and their vectors across sessions."""
