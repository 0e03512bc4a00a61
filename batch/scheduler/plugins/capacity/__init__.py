"""capacity plugin (placeholder until implemented)."""
