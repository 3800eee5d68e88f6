"""Data recipes compared at the compute a user will train with: a recipes file (spec.py), the shared validation
text and each recipe's texts (texts.py), and the command that runs them (run.py, ``python -m scaling.recipes``)."""
