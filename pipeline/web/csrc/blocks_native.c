/* The distilled extractor's per-page arithmetic, in C: the block features, the forests' margins and the context
 * features of the second forest. ``pipeline/web/blocks.py`` (``features``, ``containers``), ``pipeline/web/trees.py``
 * (``Forest.margin``) and ``pipeline/web/distilled.py`` (``context_features``) hold the readable NumPy references;
 * this module computes the same numbers bit for bit (the same operations in the same order, NumPy's pairwise sum
 * where NumPy sums), so a page costs microseconds instead of the ~0.5 ms of NumPy's fixed cost per call.
 * tests/pipeline/test_blocks_native.py checks the two against each other.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef LMW_SOURCE_SHA256
#define LMW_SOURCE_SHA256 ""
#endif

/* the bits of blocks.CHAR_CLASSES, in its order */
enum { SPACE = 1, LETTER = 2, UPPER_CASE = 4, DIGIT = 8, SENTENCE_END = 16, LAST_CHAR = 32, SEPARATOR = 64 };
enum { CONTEXT_COLUMNS = 7 };

static uint8_t char_class[0x10000];
static PyObject *stopwords; /* the frozenset of blocks.STOPWORDS */
static Py_ssize_t longest_stopword;
static int configured;

/* ---- NumPy's summation, so sums and means agree to the last bit -------------------------------------------- */

static double pairwise_sum(const double *a, Py_ssize_t n) {
    if (n < 8) {
        double res = 0.;
        for (Py_ssize_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        Py_ssize_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

/* blocks.window_mean: the mean of each value and the two on either side, by differences of a running sum */
static void window_mean(const double *values, Py_ssize_t n, double outside, double *out, double *scratch) {
    double *sums = scratch; /* n + 5 */
    sums[0] = 0.;
    for (Py_ssize_t i = 0; i < n + 4; i++) {
        double v = (i < 2 || i >= n + 2) ? outside : values[i - 2];
        sums[i + 1] = sums[i] + v;
    }
    for (Py_ssize_t i = 0; i < n; i++) out[i] = (sums[i + 5] - sums[i]) / 5;
}

/* ---- argument helpers --------------------------------------------------------------------------------------- */

static int int_list(PyObject *list, Py_ssize_t n, int64_t *out, const char *name) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected a list of %zd ints", name, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

static int cmp_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* blocks.containers for one level: each id's rank among the page's distinct ids (np.unique's inverse) */
static void dense_ranks(const int64_t *ids, Py_ssize_t n, int64_t *ranks, int64_t *sorted) {
    memcpy(sorted, ids, n * sizeof(int64_t));
    qsort(sorted, n, sizeof(int64_t), cmp_int64);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (i == 0 || sorted[i] != sorted[k - 1]) sorted[k++] = sorted[i];
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t lo = 0, hi = k - 1;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (sorted[mid] < ids[i]) lo = mid + 1; else hi = mid;
        }
        ranks[i] = lo;
    }
}

/* ---- text statistics: blocks.text_stats_reference of one block -------------------------------------------------- */

static int is_stopword(PyObject *text, int kind, const void *data, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t len = end - start;
    if (len == 0 || len > longest_stopword) return 0; /* lower() never shortens a word */
    Py_UCS4 ascii[64];
    int plain = 1;
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, start + i);
        if (c >= 128) { plain = 0; break; }
        ascii[i] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
    }
    PyObject *word;
    if (plain) {
        word = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, ascii, len);
    } else { /* str.lower()'s full case mapping, exactly as the reference */
        PyObject *raw = PyUnicode_Substring(text, start, end);
        if (!raw) return -1;
        word = PyObject_CallMethod(raw, "lower", NULL);
        Py_DECREF(raw);
    }
    if (!word) return -1;
    int found = PySet_Contains(stopwords, word);
    Py_DECREF(word);
    return found;
}

/* the 10 columns of blocks.text_stats for one whitespace-normalised block */
static int text_stats(PyObject *text, double *stats, Py_ssize_t *length) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "an empty block");
        return -1;
    }
    int64_t spaces = 0, letters = 0, upper = 0, digits = 0, sentence_ends = 0, separators = 0, stop = 0;
    Py_ssize_t word_start = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (i == n || PyUnicode_READ(kind, data, i) == ' ') {
            int found = is_stopword(text, kind, data, word_start, i);
            if (found < 0) return -1;
            stop += found;
            word_start = i + 1;
        }
        if (i == n) break;
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        uint8_t cls = char_class[c < 0xFFFF ? c : 0xFFFF];
        spaces += (cls & SPACE) != 0;
        letters += (cls & LETTER) != 0;
        upper += (cls & UPPER_CASE) != 0;
        digits += (cls & DIGIT) != 0;
        sentence_ends += (cls & SENTENCE_END) != 0;
        separators += (cls & SEPARATOR) != 0;
    }
    Py_UCS4 first = PyUnicode_READ(kind, data, 0), last = PyUnicode_READ(kind, data, n - 1);
    int64_t words = spaces + 1;
    stats[0] = log1p((double)n);
    stats[1] = log1p((double)words);
    stats[2] = (double)sentence_ends / (double)words;
    stats[3] = (double)digits / (double)n;
    stats[4] = (double)upper / (double)(letters > 0 ? letters : 1);
    stats[5] = (char_class[last < 0xFFFF ? last : 0xFFFF] & LAST_CHAR) != 0;
    stats[6] = (char_class[first < 0xFFFF ? first : 0xFFFF] & UPPER_CASE) != 0;
    stats[7] = (double)(n - words + 1) / (double)words;
    stats[8] = separators >= 2;
    stats[9] = (double)stop / (double)words;
    *length = n;
    return 0;
}

/* ---- configure(char_table, stopwords) ------------------------------------------------------------------------ */

static PyObject *configure(PyObject *self, PyObject *args) {
    Py_buffer table;
    PyObject *words;
    if (!PyArg_ParseTuple(args, "y*O!", &table, &PyFrozenSet_Type, &words)) return NULL;
    if (table.len != (Py_ssize_t)sizeof(char_class)) {
        PyBuffer_Release(&table);
        return PyErr_Format(PyExc_ValueError, "char_table: expected %zu bytes", sizeof(char_class));
    }
    memcpy(char_class, table.buf, sizeof(char_class));
    PyBuffer_Release(&table);
    longest_stopword = 0;
    PyObject *it = PyObject_GetIter(words), *word;
    if (!it) return NULL;
    while ((word = PyIter_Next(it))) {
        Py_ssize_t len = PyUnicode_Check(word) ? PyUnicode_GET_LENGTH(word) : 64;
        Py_DECREF(word);
        if (len > 63) {
            Py_DECREF(it);
            return PyErr_Format(PyExc_ValueError, "stopwords: each must be a str of at most 63 characters");
        }
        if (len > longest_stopword) longest_stopword = len;
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return NULL;
    Py_XSETREF(stopwords, Py_NewRef(words));
    configured = 1;
    Py_RETURN_NONE;
}

/* ---- page_features: blocks.features and blocks.containers --------------------------------------------------- */

enum { N_LISTS = 8 }; /* link_chars, tags, landmarks, keywords, depths, links, parents, grandparents */

static PyObject *page_features(PyObject *self, PyObject *args) {
    PyObject *texts, *lists[N_LISTS];
    int n_tags, n_landmarks, n_keywords;
    Py_ssize_t n_features;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOiiin", &PyList_Type, &texts, &lists[0], &lists[1], &lists[2], &lists[3],
                          &lists[4], &lists[5], &lists[6], &lists[7], &n_tags, &n_landmarks, &n_keywords,
                          &n_features))
        return NULL;
    if (!configured) return PyErr_Format(PyExc_RuntimeError, "call configure() first");
    Py_ssize_t n = PyList_GET_SIZE(texts);
    Py_ssize_t own = 2 + 1 + 1 + 8 + 1 + (n_tags + 1) + n_landmarks + n_keywords;
    if (n == 0 || n_features != own + 4 + 7 + 8)
        return PyErr_Format(PyExc_ValueError, "page_features: %zd blocks, %zd features", n, n_features);

    PyObject *x_out = PyBytes_FromStringAndSize(NULL, n * n_features * sizeof(float));
    PyObject *groups_out = PyBytes_FromStringAndSize(NULL, n * 2 * sizeof(int64_t));
    int64_t *ints = PyMem_Malloc((N_LISTS + 3) * n * sizeof(int64_t)); /* the lists, then sorting and rank scratch */
    double *work = PyMem_Malloc((20 * n + 5) * sizeof(double));
    if (!x_out || !groups_out || !ints || !work) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int k = 0; k < N_LISTS; k++)
        if (int_list(lists[k], n, ints + k * n, "page_features") < 0) goto fail;
    const int64_t *link_chars = ints, *tags = ints + n, *landmarks = ints + 2 * n, *keywords = ints + 3 * n,
                  *depths = ints + 4 * n, *links = ints + 5 * n, *parents = ints + 6 * n, *grandparents = ints + 7 * n;
    int64_t *sorted = ints + N_LISTS * n, *groups = (int64_t *)PyBytes_AS_STRING(groups_out);

    double *stats = work, *chars = work + 10 * n, *link_density = chars + n, *log_chars = link_density + n,
           *window_c = log_chars + n, *window_l = window_c + n, *cum = window_l + n, *level_values = cum + n,
           *totals = level_values + n, *scratch = totals + 2 * n; /* totals: 2n; scratch: n + 5 */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyList_GET_ITEM(texts, i);
        Py_ssize_t length;
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "page_features: texts must be str");
            goto fail;
        }
        if (text_stats(text, stats + 10 * i, &length) < 0) goto fail;
        chars[i] = (double)length;
        link_density[i] = (double)link_chars[i] / chars[i];
        log_chars[i] = stats[10 * i];
    }
    double total = pairwise_sum(chars, n), running = 0.;
    window_mean(log_chars, n, 0., window_c, scratch);
    window_mean(link_density, n, 1., window_l, scratch);
    for (Py_ssize_t i = 0; i < n; i++) {
        cum[i] = running; /* np.cumsum(chars)[:-1], shifted by one */
        running += chars[i];
    }
    int64_t *rank0 = sorted + n, *rank1 = sorted + 2 * n;
    dense_ranks(parents, n, rank0, sorted);
    dense_ranks(grandparents, n, rank1, sorted);
    for (Py_ssize_t i = 0; i < n; i++) {
        groups[2 * i] = rank0[i];
        groups[2 * i + 1] = rank1[i];
    }

    float *x = (float *)PyBytes_AS_STRING(x_out);
    double page_log_chars = log1p(total), page_log_blocks = log1p((double)n);
    for (Py_ssize_t i = 0; i < n; i++) {
        float *row = x + i * n_features;
        const double *s = stats + 10 * i;
        Py_ssize_t c = 0;
        row[c++] = (float)s[0];
        row[c++] = (float)s[1];
        row[c++] = (float)link_density[i];
        row[c++] = (float)log1p((double)links[i]);
        for (int k = 2; k < 10; k++) row[c++] = (float)s[k];
        row[c++] = (float)((double)depths[i] / 10.0);
        for (int k = 0; k <= n_tags; k++) row[c++] = tags[i] == k ? 1.f : 0.f;
        for (int k = 0; k < n_landmarks; k++) row[c++] = (float)((landmarks[i] >> k) & 1);
        for (int k = 0; k < n_keywords; k++) row[c++] = (float)((keywords[i] >> k) & 1);
        row[c++] = (float)((double)i / (double)n);
        row[c++] = (float)(cum[i] / total);
        row[c++] = (float)page_log_chars;
        row[c++] = (float)page_log_blocks;
        row[c++] = (float)(i > 0 ? log_chars[i - 1] : 0.);
        row[c++] = (float)(i > 0 ? link_density[i - 1] : 1.);
        row[c++] = (float)(i + 1 < n ? log_chars[i + 1] : 0.);
        row[c++] = (float)(i + 1 < n ? link_density[i + 1] : 1.);
        row[c++] = (float)window_c[i];
        row[c++] = (float)window_l[i];
        row[c++] = (float)(chars[i] / total);
    }
    /* blocks._container_columns for each level: characters (log), link density, blocks (log), share of the page */
    double *sum_chars = totals, *sum_links = totals + n, *count = level_values;
    for (int level = 0; level < 2; level++) {
        for (Py_ssize_t g = 0; g < n; g++) sum_chars[g] = sum_links[g] = count[g] = 0.;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t g = groups[2 * i + level];
            sum_chars[g] += chars[i];
            sum_links[g] += (double)link_chars[i];
            count[g] += 1.;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t g = groups[2 * i + level];
            float *row = x + i * n_features + own + 11 + 4 * level;
            row[0] = (float)log1p(sum_chars[g]);
            row[1] = (float)(sum_links[g] / sum_chars[g]);
            row[2] = (float)log1p(count[g]);
            row[3] = (float)(sum_chars[g] / total);
        }
    }
    PyMem_Free(ints);
    PyMem_Free(work);
    return Py_BuildValue("(NN)", x_out, groups_out);

fail:
    Py_XDECREF(x_out);
    Py_XDECREF(groups_out);
    PyMem_Free(ints);
    PyMem_Free(work);
    return NULL;
}

/* ---- forest_margin: trees.Forest.margin ------------------------------------------------------------------------ */

static PyObject *forest_margin(PyObject *self, PyObject *args) {
    Py_buffer xb, fb, tb, vb;
    Py_ssize_t n, n_features, trees;
    int depth;
    double base;
    if (!PyArg_ParseTuple(args, "y*nny*y*y*nid", &xb, &n, &n_features, &fb, &tb, &vb, &trees, &depth, &base))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t internal = ((Py_ssize_t)1 << depth) - 1, leaves = internal + 1;
    if (depth < 1 || depth > 20 || xb.len != n * n_features * (Py_ssize_t)sizeof(float)
        || fb.len != trees * internal * (Py_ssize_t)sizeof(int64_t)
        || tb.len != trees * internal * (Py_ssize_t)sizeof(float)
        || vb.len != trees * leaves * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "forest_margin: buffer sizes do not match the shapes");
        goto done;
    }
    const float *x = xb.buf, *threshold = tb.buf;
    const int64_t *feature = fb.buf;
    const double *value = vb.buf;
    for (Py_ssize_t k = 0; k < trees * internal; k++)
        if (feature[k] < 0 || feature[k] >= n_features) {
            PyErr_SetString(PyExc_ValueError, "forest_margin: a node reads a feature beyond the rows");
            goto done;
        }
    out = PyBytes_FromStringAndSize(NULL, n * sizeof(double));
    double *leaf_values = PyMem_Malloc((trees > 0 ? trees : 1) * sizeof(double));
    if (!out || !leaf_values) {
        PyMem_Free(leaf_values);
        Py_CLEAR(out);
        PyErr_NoMemory();
        goto done;
    }
    double *margin = (double *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        const float *row = x + i * n_features;
        for (Py_ssize_t t = 0; t < trees; t++) {
            Py_ssize_t node = 0;
            for (int level = 0; level < depth; level++) {
                Py_ssize_t at = t * internal + node;
                node = 2 * node + 1 + (row[feature[at]] > threshold[at]);
            }
            leaf_values[t] = value[t * leaves + node - internal];
        }
        margin[i] = base + pairwise_sum(leaf_values, trees);
    }
    PyMem_Free(leaf_values);
done:
    PyBuffer_Release(&xb);
    PyBuffer_Release(&fb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&vb);
    return out;
}

/* ---- context_features: distilled.context_features -------------------------------------------------------------- */

static PyObject *context_features(PyObject *self, PyObject *args) {
    Py_buffer xb, pb, gb;
    Py_ssize_t n, n_features, log_chars_column;
    if (!PyArg_ParseTuple(args, "y*nny*y*n", &xb, &n, &n_features, &pb, &gb, &log_chars_column)) return NULL;
    PyObject *out = NULL;
    double *work = NULL;
    if (n < 1 || log_chars_column < 0 || log_chars_column >= n_features
        || xb.len != n * n_features * (Py_ssize_t)sizeof(float) || pb.len != n * (Py_ssize_t)sizeof(double)
        || gb.len != 2 * n * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "context_features: buffer sizes do not match the shapes");
        goto done;
    }
    const float *x = xb.buf;
    const double *p = pb.buf;
    const int64_t *groups = gb.buf;
    for (Py_ssize_t k = 0; k < 2 * n; k++)
        if (groups[k] < 0 || groups[k] >= n) {
            PyErr_SetString(PyExc_ValueError, "context_features: a container index beyond the page");
            goto done;
        }
    Py_ssize_t width = n_features + CONTEXT_COLUMNS;
    out = PyBytes_FromStringAndSize(NULL, n * width * sizeof(float));
    work = PyMem_Malloc((6 * n + 5) * sizeof(double));
    if (!out || !work) {
        Py_CLEAR(out);
        PyErr_NoMemory();
        goto done;
    }
    double *chars = work, *window = work + n, *total = work + 2 * n, *weighted = work + 3 * n,
           *level_mean = work + 4 * n, *scratch = work + 5 * n; /* level_mean: n, reused per level */
    float *rows = (float *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) chars[i] = expm1((double)x[i * n_features + log_chars_column]);
    window_mean(p, n, 0., window, scratch);
    double page = pairwise_sum(p, n) / (double)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        float *row = rows + i * width;
        memcpy(row, x + i * n_features, n_features * sizeof(float));
        row += n_features;
        row[0] = (float)(i > 0 ? p[i - 1] : 0.);
        row[1] = (float)(i + 1 < n ? p[i + 1] : 0.);
        row[2] = (float)window[i];
        row[3] = (float)page;
        row[4] = (float)p[i];
    }
    for (int level = 0; level < 2; level++) { /* distilled.container_mean, weighted by characters */
        for (Py_ssize_t g = 0; g < n; g++) total[g] = weighted[g] = 0.;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t g = groups[2 * i + level];
            total[g] += chars[i];
            weighted[g] += p[i] * chars[i];
        }
        for (Py_ssize_t g = 0; g < n; g++) level_mean[g] = weighted[g] / (total[g] > 1e-12 ? total[g] : 1e-12);
        for (Py_ssize_t i = 0; i < n; i++) rows[i * width + n_features + 5 + level] = (float)level_mean[groups[2 * i + level]];
    }
done:
    PyMem_Free(work);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&gb);
    return out;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS, "configure(char_table, stopwords): blocks.char_classes() and STOPWORDS."},
    {"page_features", page_features, METH_VARARGS,
     "page_features(texts, link_chars, tags, landmarks, keywords, depths, links, parents, grandparents, n_tags, "
     "n_landmarks, n_keywords, n_features) -> (float32 features bytes, int64 containers bytes)"},
    {"forest_margin", forest_margin, METH_VARARGS,
     "forest_margin(x, n, n_features, feature, threshold, value, trees, depth, base) -> float64 bytes"},
    {"context_features", context_features, METH_VARARGS,
     "context_features(x, n, n_features, p, groups, log_chars_column) -> float32 bytes (n, n_features + 7)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "pipeline.web._blocks_native",
    "Compiled block features and tree evaluation (see pipeline/web/csrc/blocks_native.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__blocks_native(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (m && PyModule_AddStringConstant(m, "SOURCE_SHA256", LMW_SOURCE_SHA256) < 0) Py_CLEAR(m);
    return m;
}
