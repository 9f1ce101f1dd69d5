"""lightningrl package."""
