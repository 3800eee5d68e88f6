/* BPE training in C (bpe_train.c), exposed by the module in bpe_native.c. */
#include <Python.h>

/* train_merges(vocab: list[bytes], words: list[bytes], counts: list[int], num_merges) -> list[(a, b)] */
PyObject *lmw_train_merges(PyObject *self, PyObject *args);

/* count_pretokens(texts: list[str]) -> {pre-token UTF-8 bytes: count} over all texts */
PyObject *lmw_count_pretokens(PyObject *self, PyObject *texts);
