import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    """Tiny models: one intra-op thread is fastest and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
