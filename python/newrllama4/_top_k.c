/* The top k logits of every row of a step, in one read of each row.

numpy has no batched top-k that reads a row once: its fastest route (group maxima, a
partition, a gather) reads each row several times, which for a vocabulary of 262,144
logits is a visible share of a step. Here each row is scanned 64 logits at a time against the k-th best
logit kept so far (a comparison the compiler vectorises); only a block holding a
better one is looked at logit by logit, which after the first few thousand logits is
rare. The order is the sampler's: higher logit first, ties by lower id; -inf and NaN
never enter, so a row allowing fewer than k tokens fills the rest with id 0 and -inf.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define BLOCK 64

typedef struct {
    float value;
    int64_t id;
} Candidate;

static int better(const Candidate *x, const Candidate *y) {
    return x->value > y->value || (x->value == y->value && x->id < y->id);
}

static int best_first(const void *a, const void *b) {
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static void swap(Candidate *a, Candidate *b) {
    Candidate t = *a;
    *a = *b;
    *b = t;
}

/* Reorders c[0..m) so that c[0..k) are the k best, c[k - 1] the k-th best (quickselect:
   a sort of every compaction cost more than the scan). Ids are distinct: the order is total. */
static void select_best(Candidate *c, Py_ssize_t m, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = m - 1, target = k - 1;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (better(&c[mid], &c[lo])) swap(&c[mid], &c[lo]);
        if (better(&c[hi], &c[lo])) swap(&c[hi], &c[lo]);
        if (better(&c[hi], &c[mid])) swap(&c[hi], &c[mid]);
        Candidate pivot = c[mid];  /* the median of three */
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (better(&c[i], &pivot)) i++;
            while (better(&pivot, &c[j])) j--;
            if (i <= j) {
                swap(&c[i], &c[j]);
                i++;
                j--;
            }
        }
        if (target <= j) hi = j;
        else if (target >= i) lo = i;
        else return;
    }
}

/* Keeps the k best of row[0..n) in kept[0..k), best first; returns how many there are (< k
   when fewer logits are finite). `capacity` >= k + BLOCK. A logit enters only above the
   k-th best kept so far: one equal to it comes later, so it has the higher id and ranks after. */
static Py_ssize_t top_k_row(const float *row, Py_ssize_t n, Py_ssize_t k, Candidate *kept,
                            Py_ssize_t capacity) {
    Py_ssize_t m = 0;
    float floor_value = -INFINITY;
    for (Py_ssize_t start = 0; start < n; start += BLOCK) {
        Py_ssize_t stop = start + BLOCK < n ? start + BLOCK : n;
        int any = 0;
        for (Py_ssize_t j = start; j < stop; j++) any |= row[j] > floor_value;
        if (!any) continue;
        for (Py_ssize_t j = start; j < stop; j++) {
            if (row[j] > floor_value) {
                kept[m].value = row[j];
                kept[m].id = j;
                m++;
            }
        }
        if (m + BLOCK > capacity) {
            select_best(kept, m, k);
            m = k;
            floor_value = kept[k - 1].value;
        }
    }
    if (m > k) {
        select_best(kept, m, k);
        m = k;
    }
    qsort(kept, (size_t)m, sizeof *kept, best_first);
    return m;
}

static int check_buffer(Py_buffer *view, const char *name, Py_ssize_t itemsize, Py_ssize_t items) {
    if (view->len != itemsize * items) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, not %zd", name, view->len, itemsize * items);
        return 0;
    }
    return 1;
}

static PyObject *top_k(PyObject *self, PyObject *args) {
    Py_buffer logits, ids, values;
    Py_ssize_t n_rows, n_vocab, k;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnnw*w*", &logits, &n_rows, &n_vocab, &k, &ids, &values)) return NULL;
    PyObject *result = NULL;
    Candidate *kept = NULL;
    if (n_rows < 0 || n_vocab < 1 || k < 1) {
        PyErr_SetString(PyExc_ValueError, "n_rows >= 0, n_vocab >= 1 and k >= 1 are needed");
        goto done;
    }
    if (!check_buffer(&logits, "logits", sizeof(float), n_rows * n_vocab) ||
        !check_buffer(&ids, "ids", sizeof(int64_t), n_rows * k) ||
        !check_buffer(&values, "values", sizeof(float), n_rows * k)) {
        goto done;
    }
    /* four times k: few enough to sort in a blink, enough that a sort is rare */
    Py_ssize_t capacity = 4 * k + BLOCK;
    kept = malloc((size_t)capacity * sizeof *kept);
    if (kept == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        Py_ssize_t found = top_k_row((const float *)logits.buf + r * n_vocab, n_vocab, k, kept, capacity);
        int64_t *row_ids = (int64_t *)ids.buf + r * k;
        float *row_values = (float *)values.buf + r * k;
        for (Py_ssize_t q = 0; q < k; q++) {
            row_ids[q] = q < found ? kept[q].id : 0;
            row_values[q] = q < found ? kept[q].value : -INFINITY;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(kept);
    PyBuffer_Release(&logits);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&values);
    return result;
}

static PyMethodDef methods[] = {
    {"top_k", top_k, METH_VARARGS,
     "top_k(logits, n_rows, n_vocab, k, ids, values): the k best of each row of float32 `logits`, best first "
     "(ties by lower id), into int64 `ids` and float32 `values` (n_rows x k, C order)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_top_k", NULL, -1, methods};

PyMODINIT_FUNC PyInit__top_k(void) { return PyModule_Create(&module); }
