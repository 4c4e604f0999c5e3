"""REST API for search's own data: learned requests (curators only: they are other users' words)."""
