"""Hidden suite of assignment 04: positions and embeddings."""
