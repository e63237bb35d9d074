"""kraft."""
