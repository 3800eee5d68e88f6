/* The BPE training merge loop (bpe_train.c), exposed by the module in bpe_native.c. */
#include <Python.h>

/* train_merges(vocab: list[bytes], words: list[bytes], counts: list[int], num_merges) -> list[(a, b)] */
PyObject *lmw_train_merges(PyObject *self, PyObject *args);
