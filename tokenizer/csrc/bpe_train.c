/* The BPE training merge loop in C: ``tokenizer.bpe.merge_counts`` (the readable reference) without the
 * interpreter. Same algorithm, same result:
 *   - words are the unique pre-tokens as arrays of token ids, each with its count;
 *   - pair_count[p] is the count of pair p over all words, where[p] the words that may hold p (a superset, with
 *     repeats; a word is merged once per step thanks to a stamp);
 *   - a max-heap with lazy invalidation yields the most frequent pair, ties to the lexicographically greatest
 *     (bytes_a, bytes_b), then (as Python's tuple comparison does for pairs with equal bytes) the smaller ids;
 *   - merging a word changes only the pairs next to each match (old positions j-1, j, j+1; new k-1, k), so a long
 *     CJK pre-token costs what its matches cost.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpe_train.h"
#include "pretokenizer.h"

/* Resize the array *data to `cap` elements of `size` bytes; -1 on memory errors, with *data left as it was. */
static int resize_array(void **data, size_t cap, size_t size) {
    void *resized = PyMem_RawRealloc(*data, cap * size);
    if (!resized) return -1;
    *data = resized;
    return 0;
}

typedef struct { uint32_t *data; size_t len, cap; } U32Vec;

static int u32_push(U32Vec *v, uint32_t x) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        if (resize_array((void **)&v->data, cap, sizeof *v->data) < 0) return -1;
        v->cap = cap;
    }
    v->data[v->len++] = x;
    return 0;
}

typedef struct {
    /* tokens: id -> bytes */
    uint8_t *bytes; size_t bytes_len, bytes_cap;
    U32Vec tok_at, tok_len;
    /* words: ids in one arena, each at word_at[w] with word_len[w] ids */
    uint32_t *arena, *word_at, *word_len, *word_stamp;
    int64_t *freq;
    size_t n_words;
    /* pairs: (a, b) -> pair id, open addressing over pair ids */
    uint32_t *slots; uint64_t mask;
    U32Vec pa, pb, pstamp;
    int64_t *count; size_t count_cap;
    U32Vec *where; size_t where_cap;
    /* max-heap of (count, pair id) */
    int64_t *heap_count; uint32_t *heap_pair; size_t heap_len, heap_cap;
} Trainer;

#define NO_PAIR UINT32_MAX

static int compare_bytes(const Trainer *t, uint32_t x, uint32_t y) {
    uint32_t lx = t->tok_len.data[x], ly = t->tok_len.data[y];
    int c = memcmp(t->bytes + t->tok_at.data[x], t->bytes + t->tok_at.data[y], lx < ly ? lx : ly);
    return c ? c : (lx > ly) - (lx < ly);
}

/* Whether entry (cx, p) beats (cy, q): the higher count, then the greater (bytes_a, bytes_b), then smaller ids. */
static int beats(const Trainer *t, int64_t cx, uint32_t p, int64_t cy, uint32_t q) {
    if (cx != cy) return cx > cy;
    uint32_t a = t->pa.data[p], b = t->pb.data[p], c = t->pa.data[q], d = t->pb.data[q];
    int cmp = a == c ? 0 : compare_bytes(t, a, c);
    if (!cmp) cmp = b == d ? 0 : compare_bytes(t, b, d);
    if (cmp) return cmp > 0;
    return a != c ? a < c : b < d;
}

static int heap_push(Trainer *t, uint32_t p) {
    if (t->heap_len == t->heap_cap) {
        size_t cap = t->heap_cap ? t->heap_cap * 2 : 1024;
        if (resize_array((void **)&t->heap_count, cap, sizeof *t->heap_count) < 0 ||
            resize_array((void **)&t->heap_pair, cap, sizeof *t->heap_pair) < 0)
            return -1;
        t->heap_cap = cap;
    }
    int64_t c = t->count[p];
    size_t i = t->heap_len++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!beats(t, c, p, t->heap_count[up], t->heap_pair[up])) break;
        t->heap_count[i] = t->heap_count[up];
        t->heap_pair[i] = t->heap_pair[up];
        i = up;
    }
    t->heap_count[i] = c;
    t->heap_pair[i] = p;
    return 0;
}

static void heap_pop(Trainer *t) {
    size_t n = --t->heap_len, i = 0;
    int64_t c = t->heap_count[n];
    uint32_t p = t->heap_pair[n];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && beats(t, t->heap_count[child + 1], t->heap_pair[child + 1], t->heap_count[child],
                                   t->heap_pair[child]))
            child++;
        if (!beats(t, t->heap_count[child], t->heap_pair[child], c, p)) break;
        t->heap_count[i] = t->heap_count[child];
        t->heap_pair[i] = t->heap_pair[child];
        i = child;
    }
    t->heap_count[i] = c;
    t->heap_pair[i] = p;
}

static int grow_pairs(Trainer *t) {
    uint64_t n = (t->mask + 1) * 2;
    uint32_t *slots = PyMem_RawMalloc(n * sizeof(uint32_t));
    if (!slots) return -1;
    memset(slots, 0xFF, n * sizeof(uint32_t));
    for (uint32_t p = 0; p < t->pa.len; p++) {
        uint64_t key = ((uint64_t)t->pa.data[p] << 32) | t->pb.data[p];
        uint64_t i = mix64(key) & (n - 1);
        while (slots[i] != NO_PAIR) i = (i + 1) & (n - 1);
        slots[i] = p;
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->mask = n - 1;
    return 0;
}

/* The id of pair (a, b), created with count 0 when new; NO_PAIR on memory errors. */
static uint32_t pair_id(Trainer *t, uint32_t a, uint32_t b) {
    uint64_t key = ((uint64_t)a << 32) | b, i = mix64(key) & t->mask;
    for (;; i = (i + 1) & t->mask) {
        uint32_t p = t->slots[i];
        if (p == NO_PAIR) break;
        if (t->pa.data[p] == a && t->pb.data[p] == b) return p;
    }
    uint32_t p = (uint32_t)t->pa.len;
    if (u32_push(&t->pa, a) < 0 || u32_push(&t->pb, b) < 0 || u32_push(&t->pstamp, UINT32_MAX) < 0) return NO_PAIR;
    if (t->pa.len > t->count_cap) {
        size_t cap = t->count_cap ? t->count_cap * 2 : 1024;
        if (resize_array((void **)&t->count, cap, sizeof *t->count) < 0 ||
            resize_array((void **)&t->where, cap, sizeof *t->where) < 0)
            return NO_PAIR;
        t->count_cap = cap;
    }
    t->count[p] = 0;
    t->where[p] = (U32Vec){0};
    t->slots[i] = p;
    if (t->pa.len * 2 > t->mask + 1 && grow_pairs(t) < 0) return NO_PAIR;
    return p;
}

/* Add `delta` occurrences (times the word's count) of pair (a, b) in word w; remember it as changed. */
static int touch(Trainer *t, uint32_t a, uint32_t b, uint32_t w, int64_t delta, uint32_t step, U32Vec *changed) {
    uint32_t p = pair_id(t, a, b);
    if (p == NO_PAIR) return -1;
    t->count[p] += delta;
    if (delta > 0) {
        U32Vec *where = &t->where[p];
        if ((!where->len || where->data[where->len - 1] != w) && u32_push(where, w) < 0) return -1;
    }
    if (t->pstamp.data[p] != step) {
        t->pstamp.data[p] = step;
        if (u32_push(changed, p) < 0) return -1;
    }
    return 0;
}

/* Merge every non-overlapping (a, b) of word w, left to right, into `new`, updating the pair counts next to each
 * match. `old` is scratch for the word before the merge. */
static int merge_word(Trainer *t, uint32_t w, uint32_t a, uint32_t b, uint32_t new, uint32_t step, U32Vec *old,
                      U32Vec *changed) {
    uint32_t *word = t->arena + t->word_at[w], n = t->word_len[w];
    int64_t f = t->freq[w];
    uint32_t i = 0, m = 0;
    while (i + 1 < n && !(word[i] == a && word[i + 1] == b)) i++;
    if (i + 1 >= n) return 0; /* the word lost this pair to an earlier merge */
    old->len = 0;
    for (uint32_t k = 0; k < n; k++)
        if (u32_push(old, word[k]) < 0) return -1;
    const uint32_t *o = old->data;
    int64_t removed_upto = -1, added_upto = -1; /* old / new pair positions already counted */
    i = 0;
    while (i < n) {
        if (i + 1 < n && o[i] == a && o[i + 1] == b) {
            for (int64_t p = (int64_t)i - 1; p <= (int64_t)i + 1; p++) /* old pairs at i-1, i, i+1 */
                if (p >= 0 && p + 1 < n && p > removed_upto) {
                    if (touch(t, o[p], o[p + 1], w, -f, step, changed) < 0) return -1;
                    removed_upto = p;
                }
            word[m++] = new;
            i += 2;
        } else {
            word[m++] = o[i++];
        }
    }
    t->word_len[w] = m;
    /* new pairs at k-1 and k for every merged position k */
    for (uint32_t k = 0; k < m; k++) {
        if (word[k] != new) continue;
        /* `new` may also be an old token id only if it was in the word before: it is fresh, so no */
        for (int64_t p = (int64_t)k - 1; p <= (int64_t)k; p++)
            if (p >= 0 && p + 1 < m && p > added_upto) {
                if (touch(t, word[p], word[p + 1], w, f, step, changed) < 0) return -1;
                added_upto = p;
            }
    }
    return 0;
}

static int add_token(Trainer *t, const uint8_t *data, size_t len) {
    if (reserve_bytes(&t->bytes, &t->bytes_cap, t->bytes_len + len) < 0) return -1;
    memcpy(t->bytes + t->bytes_len, data, len);
    if (u32_push(&t->tok_at, (uint32_t)t->bytes_len) < 0 || u32_push(&t->tok_len, (uint32_t)len) < 0) return -1;
    t->bytes_len += len;
    return 0;
}

static void trainer_free(Trainer *t) {
    PyMem_RawFree(t->bytes);
    PyMem_RawFree(t->tok_at.data);
    PyMem_RawFree(t->tok_len.data);
    PyMem_RawFree(t->arena);
    PyMem_RawFree(t->word_at);
    PyMem_RawFree(t->word_len);
    PyMem_RawFree(t->word_stamp);
    PyMem_RawFree(t->freq);
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->pa.data);
    PyMem_RawFree(t->pb.data);
    PyMem_RawFree(t->pstamp.data);
    for (size_t p = 0; t->where && p < t->pa.len; p++) PyMem_RawFree(t->where[p].data);
    PyMem_RawFree(t->where);
    PyMem_RawFree(t->count);
    PyMem_RawFree(t->heap_count);
    PyMem_RawFree(t->heap_pair);
}

/* Load the vocabulary (bytes in id order) and the words (bytes) with their counts. */
static int trainer_load(Trainer *t, PyObject *vocab, PyObject *words, PyObject *counts) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(vocab); i++) {
        PyObject *token = PyList_GET_ITEM(vocab, i);
        if (!PyBytes_Check(token)) { PyErr_SetString(PyExc_TypeError, "vocab must hold bytes"); return -1; }
        if (add_token(t, (uint8_t *)PyBytes_AS_STRING(token), PyBytes_GET_SIZE(token)) < 0) goto oom;
    }
    size_t n = t->n_words = PyList_GET_SIZE(words), total = 0;
    if ((size_t)PyList_GET_SIZE(counts) != n) { PyErr_SetString(PyExc_ValueError, "words and counts differ"); return -1; }
    for (size_t w = 0; w < n; w++) {
        PyObject *word = PyList_GET_ITEM(words, w);
        if (!PyBytes_Check(word)) { PyErr_SetString(PyExc_TypeError, "words must be bytes"); return -1; }
        total += PyBytes_GET_SIZE(word);
    }
    t->arena = PyMem_RawMalloc((total + 1) * sizeof(uint32_t));
    t->word_at = PyMem_RawMalloc((n + 1) * sizeof(uint32_t));
    t->word_len = PyMem_RawMalloc((n + 1) * sizeof(uint32_t));
    t->word_stamp = PyMem_RawMalloc((n + 1) * sizeof(uint32_t));
    t->freq = PyMem_RawMalloc((n + 1) * sizeof(int64_t));
    if (!t->arena || !t->word_at || !t->word_len || !t->word_stamp || !t->freq) goto oom;
    size_t at = 0;
    for (size_t w = 0; w < n; w++) {
        PyObject *word = PyList_GET_ITEM(words, w);
        const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(word);
        Py_ssize_t len = PyBytes_GET_SIZE(word);
        t->freq[w] = PyLong_AsLongLong(PyList_GET_ITEM(counts, w));
        if (t->freq[w] == -1 && PyErr_Occurred()) return -1;
        t->word_at[w] = (uint32_t)at;
        t->word_len[w] = (uint32_t)len;
        t->word_stamp[w] = UINT32_MAX;
        for (Py_ssize_t k = 0; k < len; k++) t->arena[at++] = s[k];
    }
    t->mask = (1u << 16) - 1;
    t->slots = PyMem_RawMalloc((t->mask + 1) * sizeof(uint32_t));
    if (!t->slots) goto oom;
    memset(t->slots, 0xFF, (t->mask + 1) * sizeof(uint32_t));
    U32Vec ignored = {0};
    for (size_t w = 0; w < n; w++) {
        const uint32_t *word = t->arena + t->word_at[w];
        for (uint32_t k = 0; k + 1 < t->word_len[w]; k++)
            if (touch(t, word[k], word[k + 1], (uint32_t)w, t->freq[w], 0, &ignored) < 0) goto oom;
    }
    PyMem_RawFree(ignored.data);
    for (uint32_t p = 0; p < t->pa.len; p++) {
        t->pstamp.data[p] = UINT32_MAX;
        if (t->count[p] > 0 && heap_push(t, p) < 0) goto oom;
    }
    return 0;
oom:
    PyErr_NoMemory();
    return -1;
}

/* One merge: the best pair, merged in every word that holds it. Returns the pair id, NO_PAIR when none is left,
 * or -2 (as NO_PAIR - 1) on memory errors. */
static uint32_t merge_step(Trainer *t, uint32_t step, U32Vec *old, U32Vec *changed) {
    while (t->heap_len && t->count[t->heap_pair[0]] != t->heap_count[0]) heap_pop(t); /* stale entries */
    if (!t->heap_len) return NO_PAIR;
    uint32_t p = t->heap_pair[0], a = t->pa.data[p], b = t->pb.data[p], new = (uint32_t)t->tok_at.len;
    heap_pop(t);
    size_t la = t->tok_len.data[a], lb = t->tok_len.data[b];
    uint8_t *joined = PyMem_RawMalloc(la + lb + 1);
    if (!joined) return NO_PAIR - 1;
    memcpy(joined, t->bytes + t->tok_at.data[a], la);
    memcpy(joined + la, t->bytes + t->tok_at.data[b], lb);
    int rc = add_token(t, joined, la + lb);
    PyMem_RawFree(joined);
    if (rc < 0) return NO_PAIR - 1;
    U32Vec where = t->where[p];
    t->where[p] = (U32Vec){0};
    changed->len = 0;
    for (size_t k = 0; k < where.len; k++) {
        uint32_t w = where.data[k];
        if (t->word_stamp[w] == step) continue;
        t->word_stamp[w] = step;
        if (merge_word(t, w, a, b, new, step, old, changed) < 0) { PyMem_RawFree(where.data); return NO_PAIR - 1; }
    }
    PyMem_RawFree(where.data);
    for (size_t k = 0; k < changed->len; k++) {
        uint32_t q = changed->data[k];
        if (t->count[q] > 0) {
            if (heap_push(t, q) < 0) return NO_PAIR - 1;
        } else {
            PyMem_RawFree(t->where[q].data);
            t->where[q] = (U32Vec){0};
        }
    }
    return p;
}

PyObject *lmw_train_merges(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *vocab, *words, *counts;
    Py_ssize_t num_merges;
    if (!PyArg_ParseTuple(args, "O!O!O!n", &PyList_Type, &vocab, &PyList_Type, &words, &PyList_Type, &counts,
                          &num_merges))
        return NULL;
    Trainer t;
    memset(&t, 0, sizeof(t));
    PyObject *result = NULL;
    U32Vec old = {0}, changed = {0};
    if (trainer_load(&t, vocab, words, counts) < 0) goto done;
    if (!(result = PyList_New(0))) goto done;
    for (Py_ssize_t step = 0; step < num_merges; step++) {
        uint32_t p = merge_step(&t, (uint32_t)step, &old, &changed);
        if (p == NO_PAIR) break;
        if (p == NO_PAIR - 1) { PyErr_NoMemory(); Py_CLEAR(result); break; }
        PyObject *pair = Py_BuildValue("(II)", t.pa.data[p], t.pb.data[p]);
        if (!pair || PyList_Append(result, pair) < 0) { Py_XDECREF(pair); Py_CLEAR(result); break; }
        Py_DECREF(pair);
    }
done:
    PyMem_RawFree(old.data);
    PyMem_RawFree(changed.data);
    trainer_free(&t);
    return result;
}

/* ---- pre-token counting: UTF-8 bytes -> count ------------------------------------------------------------ */

typedef struct { uint64_t hash; uint32_t key_at, key_len; int64_t count; } CountSlot; /* key_len 0: empty */

typedef struct {
    CountSlot *slots; size_t mask, used;
    uint8_t *keys; size_t keys_len, keys_cap;
} Counts;

static int counts_grow(Counts *c) {
    size_t n = (c->mask + 1) * 2;
    CountSlot *slots = PyMem_RawCalloc(n, sizeof(CountSlot));
    if (!slots) return -1;
    for (size_t i = 0; i <= c->mask; i++) {
        if (!c->slots[i].key_len) continue;
        size_t j = c->slots[i].hash & (n - 1);
        while (slots[j].key_len) j = (j + 1) & (n - 1);
        slots[j] = c->slots[i];
    }
    PyMem_RawFree(c->slots);
    c->slots = slots;
    c->mask = n - 1;
    return 0;
}

static int counts_add(Counts *c, const uint8_t *key, size_t len) {
    uint64_t hash = hash_bytes(key, len);
    size_t i = hash & c->mask;
    for (;; i = (i + 1) & c->mask) {
        CountSlot *slot = &c->slots[i];
        if (!slot->key_len) break;
        if (slot->hash == hash && slot->key_len == len && !memcmp(c->keys + slot->key_at, key, len)) {
            slot->count++;
            return 0;
        }
    }
    if (reserve_bytes(&c->keys, &c->keys_cap, c->keys_len + len) < 0) return -1;
    memcpy(c->keys + c->keys_len, key, len);
    c->slots[i] = (CountSlot){hash, (uint32_t)c->keys_len, (uint32_t)len, 1};
    c->keys_len += len;
    if (++c->used * 2 > c->mask + 1) return counts_grow(c);
    return 0;
}

static int count_text(Counts *c, PyObject *text) {
    PyObject *owner = NULL;
    const uint8_t *s;
    Py_ssize_t n, i = 0, chars;
    if (!PyUnicode_Check(text)) { PyErr_SetString(PyExc_TypeError, "texts must hold str"); return -1; }
    if (PyUnicode_IS_ASCII(text)) {
        s = PyUnicode_1BYTE_DATA(text);
        n = PyUnicode_GET_LENGTH(text);
    } else {
        if (!(owner = PyUnicode_AsUTF8String(text))) return -1;
        s = (const uint8_t *)PyBytes_AS_STRING(owner);
        n = PyBytes_GET_SIZE(owner);
    }
    int rc = 0;
    while (i < n && rc == 0) {
        Py_ssize_t end = next_pretoken(s, n, i, &chars);
        rc = counts_add(c, s + i, end - i);
        i = end;
    }
    Py_XDECREF(owner);
    if (rc < 0) PyErr_NoMemory();
    return rc;
}

PyObject *lmw_count_pretokens(PyObject *self, PyObject *texts) {
    (void)self;
    Counts c = {0};
    PyObject *seq = PySequence_Fast(texts, "texts must be a sequence of str"), *result = NULL;
    if (!seq) return NULL;
    c.mask = (1u << 12) - 1;
    if (!(c.slots = PyMem_RawCalloc(c.mask + 1, sizeof(CountSlot)))) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++)
        if (count_text(&c, PySequence_Fast_GET_ITEM(seq, k)) < 0) goto done;
    if (!(result = PyDict_New())) goto done;
    for (size_t i = 0; i <= c.mask; i++) {
        CountSlot *slot = &c.slots[i];
        if (!slot->key_len) continue;
        PyObject *key = PyBytes_FromStringAndSize((const char *)c.keys + slot->key_at, slot->key_len);
        PyObject *value = PyLong_FromLongLong(slot->count);
        int rc = key && value ? PyDict_SetItem(result, key, value) : -1;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (rc < 0) { Py_CLEAR(result); break; }
    }
done:
    Py_DECREF(seq);
    PyMem_RawFree(c.slots);
    PyMem_RawFree(c.keys);
    return result;
}
