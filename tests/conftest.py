"""Kernel tests run on CUDA when present, else under the Triton CPU interpreter.

TRITON_INTERPRET must be set before triton is first imported, hence here at collection time."""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

