/* The hot loops of byte-level BPE encoding, in C: the GPT-2 pre-tokenizer as a scanner over code points and the
 * lowest-rank-first merge loop, with a cache of pre-token -> ids. ``tokenizer/encoder.py`` holds the readable
 * reference (``Tokenizer._bpe``, ``tokenizer.bpe.pretokenize``) and falls back to it when this module is absent;
 * tests/tokenizer/test_native.py checks the two against each other, the ``regex`` module and tiktoken.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpe_train.h"
#include "pretokenizer.h"
#include "unicode_classes.h"

#ifndef LMW_SOURCE_SHA256
#define LMW_SOURCE_SHA256 ""
#endif

uint8_t *lmw_char_class;

static void fill_class(const unsigned int (*ranges)[2], size_t n, uint8_t cls) {
    for (size_t i = 0; i < n; i++) memset(lmw_char_class + ranges[i][0], cls, ranges[i][1] - ranges[i][0]);
}

/* ---- growable arrays and hashing ---------------------------------------------------------------------- */

typedef struct { uint32_t *data; size_t len, cap; } IdVec;

static int idvec_reserve(IdVec *v, size_t extra) {
    if (v->len + extra <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 256;
    while (cap < v->len + extra) cap *= 2;
    uint32_t *data = PyMem_RawRealloc(v->data, cap * sizeof(uint32_t));
    if (!data) return -1;
    v->data = data;
    v->cap = cap;
    return 0;
}

/* ---- merge ranks: pair of ids -> (rank, merged id), open addressing ------------------------------------ */

typedef struct { uint64_t key; uint32_t rank, merged; } RankSlot; /* key = a << 32 | b, ~0 when empty */
#define EMPTY_KEY UINT64_MAX
#define NO_RANK UINT32_MAX

typedef struct { RankSlot *slots; uint64_t mask; } RankTable;

static inline RankSlot *rank_find(const RankTable *t, uint32_t a, uint32_t b) {
    uint64_t key = ((uint64_t)a << 32) | b;
    for (uint64_t i = mix64(key) & t->mask;; i = (i + 1) & t->mask) {
        RankSlot *slot = &t->slots[i];
        if (slot->key == key || slot->key == EMPTY_KEY) return slot;
    }
}

static inline uint32_t rank_of(const RankTable *t, uint32_t a, uint32_t b) {
    RankSlot *slot = rank_find(t, a, b);
    return slot->key == EMPTY_KEY ? NO_RANK : slot->rank;
}

/* ---- the pre-token cache: UTF-8 bytes -> ids --------------------------------------------------------- */

typedef struct { uint64_t hash; uint32_t key_at, key_len, ids_at, ids_len; } CacheSlot; /* key_len 0: empty */

typedef struct {
    CacheSlot *slots;
    size_t mask, used;
    uint8_t *keys; size_t keys_len, keys_cap;
    IdVec ids;
} Cache;

#define CACHE_MAX_ENTRIES (1u << 20) /* cleared when full, like the reference's CACHE_SIZE */
#define CACHE_MAX_BYTES (64u << 20)

static int cache_init(Cache *c) {
    memset(c, 0, sizeof(*c));
    c->mask = (1u << 12) - 1;
    c->slots = PyMem_RawCalloc(c->mask + 1, sizeof(CacheSlot));
    return c->slots ? 0 : -1;
}

static void cache_free(Cache *c) {
    PyMem_RawFree(c->slots);
    PyMem_RawFree(c->keys);
    PyMem_RawFree(c->ids.data);
    memset(c, 0, sizeof(*c));
}

static void cache_clear(Cache *c) {
    memset(c->slots, 0, (c->mask + 1) * sizeof(CacheSlot));
    c->used = c->keys_len = c->ids.len = 0;
}

static CacheSlot *cache_find(Cache *c, const uint8_t *key, size_t len, uint64_t hash) {
    for (size_t i = hash & c->mask;; i = (i + 1) & c->mask) {
        CacheSlot *slot = &c->slots[i];
        if (slot->key_len == 0) return slot;
        if (slot->hash == hash && slot->key_len == len && memcmp(c->keys + slot->key_at, key, len) == 0) return slot;
    }
}

static int cache_grow(Cache *c) {
    size_t old_n = c->mask + 1, n = old_n * 2;
    CacheSlot *old = c->slots, *slots = PyMem_RawCalloc(n, sizeof(CacheSlot));
    if (!slots) return -1;
    c->slots = slots;
    c->mask = n - 1;
    for (size_t i = 0; i < old_n; i++) {
        if (old[i].key_len == 0) continue;
        size_t j = old[i].hash & c->mask;
        while (slots[j].key_len) j = (j + 1) & c->mask;
        slots[j] = old[i];
    }
    PyMem_RawFree(old);
    return 0;
}

/* Remember ids[0:n] for key; the ids live in c->ids. Returns -1 on memory errors. */
static int cache_put(Cache *c, const uint8_t *key, size_t len, uint64_t hash, const uint32_t *ids, size_t n) {
    if (c->used >= CACHE_MAX_ENTRIES || c->keys_len + len > CACHE_MAX_BYTES) cache_clear(c);
    if ((c->used + 1) * 2 > c->mask + 1 && cache_grow(c) < 0) return -1;
    if (reserve_bytes(&c->keys, &c->keys_cap, c->keys_len + len) < 0) return -1;
    if (idvec_reserve(&c->ids, n) < 0) return -1;
    CacheSlot *slot = cache_find(c, key, len, hash);
    memcpy(c->keys + c->keys_len, key, len);
    memcpy(c->ids.data + c->ids.len, ids, n * sizeof(uint32_t));
    *slot = (CacheSlot){hash, (uint32_t)c->keys_len, (uint32_t)len, (uint32_t)c->ids.len, (uint32_t)n};
    c->keys_len += len;
    c->ids.len += n;
    c->used++;
    return 0;
}

/* ---- BPE of one pre-token ---------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    uint32_t byte_ids[256];
    RankTable ranks;
    PyObject **id_objects; /* id -> int object, so building the result list allocates nothing per id */
    uint32_t n_ids;
    Cache cache;
    IdVec work; /* scratch: symbols of the pre-token being merged */
    IdVec heap, next, prev;
} Encoder;

#define SHORT_PRETOKEN 64 /* bytes; longer pre-tokens are merged with a heap */

/* Short pre-tokens: rescan the adjacent pairs' ranks for the lowest (the leftmost wins ties), merge it, repeat.
 * rank[i] caches the rank of (w[i], w[i+1]); only the two pairs next to a merge change. */
static size_t merge_short(const Encoder *e, uint32_t *w, size_t n) {
    uint32_t rank[SHORT_PRETOKEN];
    for (size_t i = 0; i + 1 < n; i++) rank[i] = rank_of(&e->ranks, w[i], w[i + 1]);
    while (n > 1) {
        uint32_t best = NO_RANK;
        size_t at = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (rank[i] < best) { best = rank[i]; at = i; }
        if (best == NO_RANK) break;
        w[at] = rank_find(&e->ranks, w[at], w[at + 1])->merged;
        memmove(w + at + 1, w + at + 2, (n - at - 2) * sizeof(uint32_t));
        memmove(rank + at + 1, rank + at + 2, (n > at + 3 ? n - at - 3 : 0) * sizeof(uint32_t));
        n--;
        if (at + 1 < n) rank[at] = rank_of(&e->ranks, w[at], w[at + 1]);
        if (at > 0) rank[at - 1] = rank_of(&e->ranks, w[at - 1], w[at]);
    }
    return n;
}

/* Min-heap of (rank << 32 | position): the lowest rank first, then the leftmost position. */
static void heap_push(uint64_t *data, size_t *len, uint64_t item) {
    size_t i = (*len)++;
    while (i > 0 && data[(i - 1) / 2] > item) { data[i] = data[(i - 1) / 2]; i = (i - 1) / 2; }
    data[i] = item;
}

static uint64_t heap_pop(uint64_t *data, size_t *len) {
    uint64_t top = data[0], last = data[--(*len)];
    size_t i = 0, n = *len;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && data[child + 1] < data[child]) child++;
        if (data[child] >= last) break;
        data[i] = data[child];
        i = child;
    }
    if (n) data[i] = last;
    return top;
}

/* Long pre-tokens (a 30 kB run of letters): the same merges in O(n log n), as ``Tokenizer._bpe`` does, with a
 * linked list of symbols and stale heap entries skipped. */
static Py_ssize_t merge_long(Encoder *e, uint32_t *w, size_t n) {
    /* each merge pushes at most 2 entries, so n - 1 + 2 (n - 1) bound the heap */
    if (idvec_reserve(&e->heap, 2 * 3 * n) < 0 || idvec_reserve(&e->next, n) < 0 || idvec_reserve(&e->prev, n) < 0)
        return -1;
    uint64_t *heap = (uint64_t *)e->heap.data;
    uint32_t *next = e->next.data, *prev = e->prev.data;
    const uint32_t gone = UINT32_MAX;
    size_t heap_len = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)(i - 1); /* wraps to UINT32_MAX for i = 0 */
        if (i + 1 < n) {
            uint32_t r = rank_of(&e->ranks, w[i], w[i + 1]);
            if (r != NO_RANK) heap_push(heap, &heap_len, ((uint64_t)r << 32) | i);
        }
    }
    while (heap_len) {
        uint64_t top = heap_pop(heap, &heap_len);
        uint32_t rank = (uint32_t)(top >> 32), i = (uint32_t)top, j = next[i];
        if (w[i] == gone || j >= n || rank_of(&e->ranks, w[i], w[j]) != rank) continue;
        w[i] = rank_find(&e->ranks, w[i], w[j])->merged;
        w[j] = gone;
        uint32_t k = next[j];
        next[i] = k;
        if (k < n) {
            prev[k] = i;
            uint32_t r = rank_of(&e->ranks, w[i], w[k]);
            if (r != NO_RANK) heap_push(heap, &heap_len, ((uint64_t)r << 32) | i);
        }
        if (prev[i] != UINT32_MAX) {
            uint32_t r = rank_of(&e->ranks, w[prev[i]], w[i]);
            if (r != NO_RANK) heap_push(heap, &heap_len, ((uint64_t)r << 32) | prev[i]);
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i = next[i]) w[m++] = w[i];
    return (Py_ssize_t)m;
}

/* Append the ids of one pre-token (UTF-8 bytes p[0:len]) to out, through the cache. */
static int encode_pretoken(Encoder *e, const uint8_t *p, size_t len, IdVec *out) {
    uint64_t hash = hash_bytes(p, len);
    CacheSlot *slot = cache_find(&e->cache, p, len, hash);
    if (slot->key_len) {
        if (idvec_reserve(out, slot->ids_len) < 0) return -1;
        memcpy(out->data + out->len, e->cache.ids.data + slot->ids_at, slot->ids_len * sizeof(uint32_t));
        out->len += slot->ids_len;
        return 0;
    }
    if (idvec_reserve(&e->work, len) < 0) return -1;
    uint32_t *w = e->work.data;
    for (size_t i = 0; i < len; i++) w[i] = e->byte_ids[p[i]];
    Py_ssize_t n = len <= SHORT_PRETOKEN ? (Py_ssize_t)merge_short(e, w, len) : merge_long(e, w, len);
    if (n < 0 || idvec_reserve(out, n) < 0) return -1;
    memcpy(out->data + out->len, w, n * sizeof(uint32_t));
    out->len += n;
    return cache_put(&e->cache, p, len, hash, w, n);
}

/* ---- the Python type -------------------------------------------------------------------------------- */

static void Encoder_dealloc(Encoder *e) {
    if (e->id_objects) {
        for (uint32_t i = 0; i < e->n_ids; i++) Py_XDECREF(e->id_objects[i]);
        PyMem_Free(e->id_objects);
    }
    PyMem_RawFree(e->ranks.slots);
    cache_free(&e->cache);
    PyMem_RawFree(e->work.data);
    PyMem_RawFree(e->heap.data);
    PyMem_RawFree(e->next.data);
    PyMem_RawFree(e->prev.data);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* Encoder(byte_ids, merges): byte_ids is 256 ids; merges lists (a, b, merged) id triples in rank order (a pair
 * that repeats keeps its first rank, as the reference's dict.setdefault does). */
static int Encoder_init(Encoder *e, PyObject *args, PyObject *kwds) {
    PyObject *byte_ids, *merges;
    static char *kwlist[] = {"byte_ids", "merges", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO", kwlist, &byte_ids, &merges)) return -1;
    PyObject *bytes_seq = PySequence_Fast(byte_ids, "byte_ids must be a sequence");
    if (!bytes_seq) return -1;
    if (PySequence_Fast_GET_SIZE(bytes_seq) != 256) {
        Py_DECREF(bytes_seq);
        PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 ids");
        return -1;
    }
    uint32_t max_id = 0;
    for (int b = 0; b < 256; b++) {
        unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(bytes_seq, b));
        if (v == (unsigned long)-1 && PyErr_Occurred()) { Py_DECREF(bytes_seq); return -1; }
        e->byte_ids[b] = (uint32_t)v;
        if (v > max_id) max_id = (uint32_t)v;
    }
    Py_DECREF(bytes_seq);
    PyObject *seq = PySequence_Fast(merges, "merges must be a sequence");
    if (!seq) return -1;
    Py_ssize_t n_merges = PySequence_Fast_GET_SIZE(seq);
    uint64_t size = 16;
    while (size < (uint64_t)n_merges * 2 + 2) size *= 2;
    e->ranks.slots = PyMem_RawMalloc(size * sizeof(RankSlot));
    if (!e->ranks.slots) { Py_DECREF(seq); PyErr_NoMemory(); return -1; }
    memset(e->ranks.slots, 0xFF, size * sizeof(RankSlot));
    e->ranks.mask = size - 1;
    for (Py_ssize_t r = 0; r < n_merges; r++) {
        unsigned int a, b, merged;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, r), "III", &a, &b, &merged)) { Py_DECREF(seq); return -1; }
        RankSlot *slot = rank_find(&e->ranks, a, b);
        if (slot->key == EMPTY_KEY) *slot = (RankSlot){((uint64_t)a << 32) | b, (uint32_t)r, merged};
        if (merged > max_id) max_id = merged;
    }
    Py_DECREF(seq);
    e->n_ids = max_id + 1;
    e->id_objects = PyMem_Calloc(e->n_ids, sizeof(PyObject *));
    if (!e->id_objects) { PyErr_NoMemory(); return -1; }
    for (uint32_t i = 0; i < e->n_ids; i++)
        if (!(e->id_objects[i] = PyLong_FromUnsignedLong(i))) return -1;
    if (cache_init(&e->cache) < 0) { PyErr_NoMemory(); return -1; }
    return 0;
}

static PyObject *ids_to_list(Encoder *e, const IdVec *ids) {
    PyObject *list = PyList_New((Py_ssize_t)ids->len);
    if (!list) return NULL;
    for (size_t i = 0; i < ids->len; i++) {
        PyObject *obj = e->id_objects[ids->data[i]];
        Py_INCREF(obj);
        PyList_SET_ITEM(list, (Py_ssize_t)i, obj);
    }
    return list;
}

/* UTF-8 view of a str: borrowed data for ASCII strings, else a new bytes object in *owner. */
static const uint8_t *utf8_of(PyObject *text, Py_ssize_t *n, PyObject **owner) {
    *owner = NULL;
    if (!PyUnicode_Check(text)) { PyErr_SetString(PyExc_TypeError, "text must be a str"); return NULL; }
    if (PyUnicode_IS_ASCII(text)) { *n = PyUnicode_GET_LENGTH(text); return PyUnicode_1BYTE_DATA(text); }
    if (!(*owner = PyUnicode_AsUTF8String(text))) return NULL;
    *n = PyBytes_GET_SIZE(*owner);
    return (const uint8_t *)PyBytes_AS_STRING(*owner);
}

/* Encode the pre-tokens of s[0:n] that start before byte `limit` (the scan sees all n bytes, so the split
 * is the whole text's). */
static int encode_span(Encoder *e, const uint8_t *s, Py_ssize_t n, Py_ssize_t limit, IdVec *out) {
    Py_ssize_t i = 0, chars;
    while (i < limit) {
        Py_ssize_t end = next_pretoken(s, n, i, &chars);
        if (encode_pretoken(e, s + i, end - i, out) < 0) return -1;
        i = end;
    }
    return 0;
}

static PyObject *Encoder_encode(Encoder *e, PyObject *text) {
    Py_ssize_t n;
    PyObject *owner;
    const uint8_t *s = utf8_of(text, &n, &owner);
    if (!s) return NULL;
    IdVec out = {0};
    int rc = encode_span(e, s, n, n, &out);
    Py_XDECREF(owner);
    PyObject *list = rc < 0 ? PyErr_NoMemory() : ids_to_list(e, &out);
    PyMem_RawFree(out.data);
    return list;
}

/* encode_settled(text, keep) -> (ids, chars): the ids of all pre-tokens but the last `keep` and the number of
 * code points they cover (``Tokenizer._split_final``: a continuation of the text can change only those). */
static PyObject *Encoder_encode_settled(Encoder *e, PyObject *args) {
    PyObject *text, *owner;
    int keep;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Ui", &text, &keep)) return NULL;
    if (keep < 0 || keep > 8) { PyErr_SetString(PyExc_ValueError, "keep must be in [0, 8]"); return NULL; }
    const uint8_t *s = utf8_of(text, &n, &owner);
    if (!s) return NULL;
    Py_ssize_t byte_at[9], char_at[9], i = 0, chars = 0, count = 0, len;
    while (i < n) { /* ring of the last keep + 1 pre-token starts */
        byte_at[count % (keep + 1)] = i;
        char_at[count % (keep + 1)] = chars;
        i = next_pretoken(s, n, i, &len);
        chars += len;
        count++;
    }
    Py_ssize_t limit = 0, limit_chars = 0;
    if (count > keep) {
        limit = keep ? byte_at[(count - keep) % (keep + 1)] : n;
        limit_chars = keep ? char_at[(count - keep) % (keep + 1)] : chars;
    }
    IdVec out = {0};
    int rc = encode_span(e, s, n, limit, &out);
    Py_XDECREF(owner);
    PyObject *list = rc < 0 ? PyErr_NoMemory() : ids_to_list(e, &out);
    PyMem_RawFree(out.data);
    if (!list) return NULL;
    return Py_BuildValue("(Nn)", list, limit_chars);
}

static PyObject *Encoder_clear_cache(Encoder *e, PyObject *unused) {
    (void)unused;
    cache_clear(&e->cache);
    Py_RETURN_NONE;
}

static PyObject *Encoder_cache_len(Encoder *e, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(e->cache.used);
}

static PyMethodDef Encoder_methods[] = {
    {"encode", (PyCFunction)Encoder_encode, METH_O, "encode(text) -> ids of text (which holds no special token)"},
    {"encode_settled", (PyCFunction)Encoder_encode_settled, METH_VARARGS,
     "encode_settled(text, keep) -> (ids of all pre-tokens but the last keep, code points they cover)"},
    {"clear_cache", (PyCFunction)Encoder_clear_cache, METH_NOARGS, "forget every cached pre-token"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Encoder_getset[] = {
    {"cache_len", (getter)Encoder_cache_len, NULL, "pre-tokens in the cache", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tokenizer._bpe_native.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoder(byte_ids, merges): byte-level BPE with GPT-2 pre-tokenization",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_methods = Encoder_methods,
    .tp_getset = Encoder_getset,
};

/* pretokenize(text) -> list of GPT-2 pre-tokens (``regex.findall(GPT2_PAT, text)``). */
static PyObject *pretokenize(PyObject *self, PyObject *text) {
    (void)self;
    Py_ssize_t n, chars, at = 0, i = 0;
    PyObject *owner;
    const uint8_t *s = utf8_of(text, &n, &owner);
    if (!s) return NULL;
    PyObject *list = PyList_New(0);
    while (list && i < n) {
        Py_ssize_t end = next_pretoken(s, n, i, &chars);
        PyObject *piece = PyUnicode_Substring(text, at, at + chars);
        if (!piece || PyList_Append(list, piece) < 0) Py_CLEAR(list);
        Py_XDECREF(piece);
        at += chars;
        i = end;
    }
    Py_XDECREF(owner);
    return list;
}

static PyMethodDef module_methods[] = {
    {"pretokenize", (PyCFunction)pretokenize, METH_O, "pretokenize(text) -> GPT-2 pre-tokens of text"},
    {"count_pretokens", (PyCFunction)lmw_count_pretokens, METH_O,
     "count_pretokens(texts) -> {pre-token bytes: count} (what bpe.count_pretokens counts)"},
    {"train_merges", (PyCFunction)lmw_train_merges, METH_VARARGS,
     "train_merges(vocab, words, counts, num_merges) -> merged (a, b) id pairs, in order (bpe.merge_counts)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tokenizer._bpe_native", "Compiled BPE encode loop (see tokenizer/csrc/bpe_native.c).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

#define N_RANGES(r) (sizeof(r) / sizeof((r)[0]))

PyMODINIT_FUNC PyInit__bpe_native(void) {
    if (!lmw_char_class) {
        lmw_char_class = PyMem_RawCalloc(N_CODE_POINTS, 1);
        if (!lmw_char_class) return PyErr_NoMemory();
        fill_class(LETTER_RANGES, N_RANGES(LETTER_RANGES), C_LETTER);
        fill_class(NUMBER_RANGES, N_RANGES(NUMBER_RANGES), C_NUMBER);
        fill_class(SPACE_RANGES, N_RANGES(SPACE_RANGES), C_SPACE);
    }
    if (PyType_Ready(&EncoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&EncoderType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0
        || PyModule_AddStringConstant(m, "SOURCE_SHA256", LMW_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
