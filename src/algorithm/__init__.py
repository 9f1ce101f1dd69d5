"""algorithm package."""
