"""alignment package."""
