"""The config and file layer every package shares: params.yaml sections, atomic files, hardware specs.

It imports nothing else of ours (an import-linter contract in pyproject.toml keeps it so), so any package may
import it without pulling in another.
"""
