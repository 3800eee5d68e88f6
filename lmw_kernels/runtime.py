"""What every kernel file needs to know about where Triton runs, and how a launch becomes a torch op.

TRITON_INTERPRET is read once, at import, as Triton itself does: with it set, kernels run on CPU
tensors through the interpreter (slow, for tests); without it they need CUDA tensors.

`kernel_op` registers a launcher as a torch op. On a GPU it is a `torch.library.triton_op` whose Triton
launches go through `launch` (`wrap_triton`): torch.compile traces into the launcher, Inductor sees the
kernel itself (no opaque dispatch per call) and CUDA graphs capture it. Inductor cannot lower a user
Triton kernel for CPU tensors, so under the interpreter the same launcher is an opaque
`torch.library.custom_op` with a fake (shape) function: the compiled model still runs on the CPU in tests.
"""

import functools
import os

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # the I/O dtypes every kernel takes
NAMESPACE = "lm_workbench"


def traced(t: torch.Tensor) -> bool:
    """Whether the op body runs under a trace (Dynamo, or AOTAutograd/Inductor decomposing the op with fake or
    proxy tensors) rather than on real tensors."""
    from torch._subclasses.fake_tensor import is_fake
    return (torch.compiler.is_compiling() or is_fake(t)
            or torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY) is not None)


def launch(kernel, like: torch.Tensor):
    """`launch(kernel, some_input)[grid](...)`: under a trace, the launch wrapped by `wrap_triton` so Inductor
    records the kernel itself; on real tensors the plain launch (wrap_triton's eager path costs ~0.1 ms of host
    time per launch through its higher-order op)."""
    if INTERPRET or not traced(like):
        return kernel
    from torch.library import wrap_triton
    return wrap_triton(kernel)


def dense(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Contiguous copies where needed. Inside a triton_op the strides a kernel gets are read while tracing and
    compiled in as constants; Inductor keeps an input's stride order but may lay a strided view out anew, so
    only compact inputs are guaranteed the strides the kernel was traced with."""
    return tuple(t.contiguous() for t in tensors)


def kernel_op(name: str, mutates_args: tuple[str, ...] = (), fake=None):
    """Decorator: the launcher `fn` as the op `lm_workbench::<name>` (triton_op on a GPU, custom_op + `fake`
    under the interpreter)."""
    def register(fn):
        if not INTERPRET:
            return torch.library.triton_op(f"{NAMESPACE}::{name}", fn, mutates_args=mutates_args)
        op = torch.library.custom_op(f"{NAMESPACE}::{name}", fn, mutates_args=mutates_args)
        if fake is not None:
            op.register_fake(fake)
        return op
    return register


@functools.cache
def sm_count(device_index: int) -> int:
    """Streaming multiprocessors of a CUDA device (cached: read once per process, never while tracing)."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def programs_for(t: torch.Tensor, per_sm: int = 1, cpu_programs: int = 4) -> int:
    """A persistent grid: `per_sm` programs per multiprocessor on CUDA; a few under the interpreter."""
    if t.device.type != "cuda":
        return cpu_programs
    return per_sm * sm_count(t.device.index if t.device.index is not None else torch.cuda.current_device())
