/* BPE training in C (bpe_train.c), exposed by the module in bpe_native.c. */
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* splitmix64's finalizer: the hash of a 64-bit key (pairs of ids) for the open-addressing tables */
static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 31; h *= 0xbf58476d1ce4e5b9ULL; h ^= h >> 27; h *= 0x94d049bb133111ebULL; h ^= h >> 31;
    return h;
}

/* hash of a byte string (pre-tokens), 8 bytes at a time through mix64 */
static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n, v;
    while (n >= 8) { memcpy(&v, p, 8); h = mix64(h ^ v); p += 8; n -= 8; }
    v = 0;
    memcpy(&v, p, n);
    return mix64(h ^ v ^ ((uint64_t)n << 56));
}

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
