"""What every kernel file needs to know about where Triton runs.

TRITON_INTERPRET is read once, at import, as Triton itself does: with it set, kernels run on CPU
tensors through the interpreter (slow, for tests); without it they need CUDA tensors.
"""

import os

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # the I/O dtypes every kernel takes
