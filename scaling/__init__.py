"""scaling package."""
