/* The top k logits of every row of a step, in one read of each row, the rows shared among threads.

numpy has no batched top-k that reads a row once: its fastest route (group maxima, a
partition, a gather) reads each row several times, which for a vocabulary of 262,144
logits is a visible share of a step. Here each row is scanned 64 logits at a time against
the k-th best logit kept so far, with vector comparisons; only a block holding a better
logit is looked into, four logits at a time, which after the first few thousand logits is
rare, so a row costs one read of its memory. The order is the sampler's: higher logit
first, ties by lower id; -inf and NaN never enter, so a row allowing fewer than k tokens
fills the rest with id 0 and -inf.

One core reads memory slower than the machine delivers it, so the rows are shared among
up to `n_threads` threads: the context's count, whose llama.cpp workers have nothing to
do between decodes. A row's answer depends on nothing but the row: the same on any
thread, on any number of threads and in any batch. The threads come from Python's own
thread layer (pythread.h), which needs no library linked on any platform.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define BLOCK 64
/* a thread is worth starting (tens of microseconds) only for a megabyte of logits or more */
#define MIN_LOGITS_PER_THREAD (1 << 18)

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

/* The two scans of a row: whether a block of 64 holds a logit above the floor, and which
   of a group of four are. SSE2 is in every x86-64 processor; elsewhere plain C. */
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>

static int block_beats(const float *block, float floor_value) {
    /* four independent ORs, so that the comparisons overlap */
    __m128 f = _mm_set1_ps(floor_value);
    __m128 a0 = _mm_cmpgt_ps(_mm_loadu_ps(block), f);
    __m128 a1 = _mm_cmpgt_ps(_mm_loadu_ps(block + 4), f);
    __m128 a2 = _mm_cmpgt_ps(_mm_loadu_ps(block + 8), f);
    __m128 a3 = _mm_cmpgt_ps(_mm_loadu_ps(block + 12), f);
    for (int j = 16; j < BLOCK; j += 16) {
        a0 = _mm_or_ps(a0, _mm_cmpgt_ps(_mm_loadu_ps(block + j), f));
        a1 = _mm_or_ps(a1, _mm_cmpgt_ps(_mm_loadu_ps(block + j + 4), f));
        a2 = _mm_or_ps(a2, _mm_cmpgt_ps(_mm_loadu_ps(block + j + 8), f));
        a3 = _mm_or_ps(a3, _mm_cmpgt_ps(_mm_loadu_ps(block + j + 12), f));
    }
    return _mm_movemask_ps(_mm_or_ps(_mm_or_ps(a0, a1), _mm_or_ps(a2, a3)));
}

static int group_above(const float *group, float floor_value) {
    return _mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(group), _mm_set1_ps(floor_value)));
}
#else
static int block_beats(const float *block, float floor_value) {
    int any = 0;  /* an OR, not an early exit, so that the compiler vectorises the loop */
    for (int j = 0; j < BLOCK; j++) any |= block[j] > floor_value;
    return any;
}

static int group_above(const float *group, float floor_value) {
    return (group[0] > floor_value) | (group[1] > floor_value) << 1 | (group[2] > floor_value) << 2 |
           (group[3] > floor_value) << 3;
}
#endif

/* Appends the logits of a full block above the floor to kept[m..), which has room for a
   block; returns the new m. While the floor is low, whether a logit passes is a coin toss
   a branch would mispredict, so each of a passing group's four is written and counted
   only if it passes. */
static Py_ssize_t keep_above(const float *row, Py_ssize_t start, float floor_value, Candidate *kept,
                             Py_ssize_t m) {
    for (Py_ssize_t g = start; g < start + BLOCK; g += 4) {
        int above = group_above(row + g, floor_value);
        if (!above) continue;
        for (int l = 0; l < 4; l++) {
            kept[m].value = row[g + l];
            kept[m].id = g + l;
            m += (above >> l) & 1;
        }
    }
    return m;
}

/* Keeps the k best of row[0..n) in kept[0..k), best first; returns how many there are (< k
   when fewer logits are finite). `capacity` >= k + BLOCK. A logit enters only above the
   k-th best kept so far: one equal to it comes later, so it has the higher id and ranks after. */
static Py_ssize_t top_k_row(const float *row, Py_ssize_t n, Py_ssize_t k, Candidate *kept,
                            Py_ssize_t capacity) {
    Py_ssize_t m = 0, start = 0;
    float floor_value = -INFINITY;
    for (; start <= n - BLOCK; start += BLOCK) {
        if (!block_beats(row + start, floor_value)) continue;
        m = keep_above(row, start, floor_value, kept, m);
        if (m + BLOCK > capacity) {
            select_best(kept, m, k);
            m = k;
            floor_value = kept[k - 1].value;
        }
    }
    for (; start < n; start++) {  /* the last, short block */
        if (row[start] > floor_value) {
            kept[m].value = row[start];
            kept[m].id = start;
            m++;
        }
    }
    if (m > k) {
        select_best(kept, m, k);
        m = k;
    }
    qsort(kept, (size_t)m, sizeof *kept, best_first);
    return m;
}

/* The rows of one call, handed out one at a time. A thread that gets its core late (llama.cpp's
   workers poll for a while after a decode) then takes fewer rows, and nobody waits for a share
   fixed in advance. */
typedef struct {
    const float *logits;
    int64_t *ids;
    float *values;
    Py_ssize_t n_rows, n_vocab, k, capacity;
    Py_ssize_t next_row;
    PyThread_type_lock next_row_lock;
} Rows;

typedef struct {
    Rows *rows;
    Candidate *kept;          /* this thread's own */
    PyThread_type_lock done;  /* held until the thread has no more rows; NULL: never started */
} Worker;

static void work(Worker *w) {
    Rows *rows = w->rows;
    for (;;) {
        PyThread_acquire_lock(rows->next_row_lock, WAIT_LOCK);
        Py_ssize_t r = rows->next_row++;
        PyThread_release_lock(rows->next_row_lock);
        if (r >= rows->n_rows) return;
        Py_ssize_t k = rows->k;
        Py_ssize_t found = top_k_row(rows->logits + r * rows->n_vocab, rows->n_vocab, k, w->kept, rows->capacity);
        for (Py_ssize_t q = 0; q < k; q++) {
            rows->ids[r * k + q] = q < found ? w->kept[q].id : 0;
            rows->values[r * k + q] = q < found ? w->kept[q].value : -INFINITY;
        }
    }
}

static void worker_thread(void *arg) {
    Worker *w = arg;
    work(w);
    PyThread_release_lock(w->done);
}

/* Starts a worker on a thread of its own; leaves w->done NULL when it cannot, and the other
   threads then take its rows. */
static void start_worker(Worker *w) {
    w->done = PyThread_allocate_lock();
    if (w->done == NULL) return;
    PyThread_acquire_lock(w->done, WAIT_LOCK);  /* a new lock: taken at once */
    if (PyThread_start_new_thread(worker_thread, w) == PYTHREAD_INVALID_THREAD_ID) {
        PyThread_release_lock(w->done);
        PyThread_free_lock(w->done);
        w->done = NULL;
    }
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
    Py_ssize_t n_rows, n_vocab, k, n_threads;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnnw*w*n", &logits, &n_rows, &n_vocab, &k, &ids, &values, &n_threads)) {
        return NULL;
    }
    PyObject *result = NULL;
    Candidate *kept = NULL;
    Worker *workers = NULL;
    Rows rows = {.logits = logits.buf, .ids = ids.buf, .values = values.buf, .n_rows = n_rows,
                 .n_vocab = n_vocab, .k = k, .next_row = 0, .next_row_lock = NULL};
    if (n_rows < 0 || n_vocab < 1 || k < 1 || n_threads < 1) {
        PyErr_SetString(PyExc_ValueError, "n_rows >= 0, n_vocab >= 1, k >= 1 and n_threads >= 1 are needed");
        goto done;
    }
    if (!check_buffer(&logits, "logits", sizeof(float), n_rows * n_vocab) ||
        !check_buffer(&ids, "ids", sizeof(int64_t), n_rows * k) ||
        !check_buffer(&values, "values", sizeof(float), n_rows * k)) {
        goto done;
    }
    Py_ssize_t threads = n_rows * n_vocab / MIN_LOGITS_PER_THREAD;
    if (threads > n_threads) threads = n_threads;
    if (threads > n_rows) threads = n_rows;
    if (threads < 1) threads = 1;
    /* four times k: few enough to sort in a blink, enough that a sort is rare */
    rows.capacity = 4 * k + BLOCK;
    kept = malloc((size_t)(threads * rows.capacity) * sizeof *kept);
    workers = calloc((size_t)threads, sizeof *workers);
    rows.next_row_lock = PyThread_allocate_lock();
    if (kept == NULL || workers == NULL || rows.next_row_lock == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < threads; t++) {
        workers[t].rows = &rows;
        workers[t].kept = kept + t * rows.capacity;
        if (t > 0) start_worker(&workers[t]);  /* workers[0] is this thread */
    }
    Py_BEGIN_ALLOW_THREADS
    work(&workers[0]);
    for (Py_ssize_t t = 1; t < threads; t++) {
        if (workers[t].done == NULL) continue;
        PyThread_acquire_lock(workers[t].done, WAIT_LOCK);
        PyThread_free_lock(workers[t].done);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    if (rows.next_row_lock != NULL) PyThread_free_lock(rows.next_row_lock);
    free(workers);
    free(kept);
    PyBuffer_Release(&logits);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&values);
    return result;
}

static PyMethodDef methods[] = {
    {"top_k", top_k, METH_VARARGS,
     "top_k(logits, n_rows, n_vocab, k, ids, values, n_threads): the k best of each row of float32 "
     "`logits`, best first (ties by lower id), into int64 `ids` and float32 `values` (n_rows x k, C "
     "order), the rows shared among up to `n_threads` threads."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_top_k", NULL, -1, methods};

PyMODINIT_FUNC PyInit__top_k(void) { return PyModule_Create(&module); }
