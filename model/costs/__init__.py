"""Napkin math: memory (ZeRO and activation bytes per GPU), roofline, napkin (one run's report), accounting (CLI)."""
