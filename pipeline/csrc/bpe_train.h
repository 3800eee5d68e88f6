/* BPE training in C (bpe_train.c), exposed by the module in bpe_native.c. */
#include <Python.h>
#include <stdint.h>

/* Grow *buf (capacity *cap, doubling from 64 KiB) to hold at least `need` bytes; -1 on memory errors. */
static inline int reserve_bytes(uint8_t **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t grown = *cap ? *cap : 1 << 16;
    while (grown < need) grown *= 2;
    uint8_t *bigger = PyMem_RawRealloc(*buf, grown);
    if (!bigger) return -1;
    *buf = bigger;
    *cap = grown;
    return 0;
}

/* train_merges(vocab: list[bytes], words: list[bytes], counts: list[int], num_merges) -> list[(a, b)] */
PyObject *lmw_train_merges(PyObject *self, PyObject *args);

/* count_pretokens(texts: list[str]) -> {pre-token UTF-8 bytes: count} over all texts */
PyObject *lmw_count_pretokens(PyObject *self, PyObject *texts);
