from tests.model.conftest import _single_thread, shards  # noqa: F401  (tiny models; the toy token shards)
