"""Experiments: settings chosen on validation, seed spreads, blind predictions, what was tried on the way."""
