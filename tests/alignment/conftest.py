from tests.model.conftest import _single_thread  # noqa: F401  (one intra-op thread for tiny models)
