/* cmrkit._trecread: regular TREC runs and qrels read in compiled code (see cmrkit/trec.py).

A file is "regular" when the numpy reader of trec.py would read it in bulk: ASCII, every line
holding exactly the format's number of fields split by single spaces, no control byte, no blank
line, no line starting with '#' (a comment in trec_eval 10.0, data in 9.0.8: the line reader
reads it as the version asked for), each query's lines together, no document twice in a query,
plain numbers. For anything else the readers return None and trec.py reads the file line by
line, which names the line and field of a problem. Values are those of the Python readers: a
score is parsed by the routine float() uses (PyOS_string_to_double), or, for a plain decimal of
at most 15 digits, as the exact integer divided by the exact power of ten, which IEEE division
rounds the same way.

Also here, for the evaluation of such files: the ranking of every query (score descending, ties
by docno descending, as trec_eval) and the grades of the ranked documents (a hash join of the run
with the qrels, both still in their raw bytes). No threads; every result is deterministic.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELD 64 /* wider qids, ranks, scores, grades: the numpy reader's limit, kept */

static const double POW10[16] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

/* byte classes: 0 inside a field (33..127), 1 space, 2 newline, 3 anything else (control
   bytes, NUL, non-ASCII) */
static unsigned char CLASS[256];

static void init_classes(void) {
    for (int c = 0; c < 256; c++)
        CLASS[c] = (c > 32 && c < 128) ? 0 : 3;
    CLASS[' '] = 1;
    CLASS['\n'] = 2;
}

typedef struct {
    const unsigned char *b, *e;
} Field;

/* The fields of the line at *pos (exactly `width`, single spaces between, ended by a newline or
   by the end of the data); *pos moves past the line. 0 when the line is irregular. */
static int split_line(const unsigned char **pos, const unsigned char *end, int width,
                      Field *out) {
    const unsigned char *p = *pos;
    for (int k = 0; k < width; k++) {
        const unsigned char *b = p;
        while (CLASS[*p] == 0) /* bytes objects end with a NUL, which stops the scan */
            p++;
        if (p == b)
            return 0; /* an empty field: a repeated or edge space, a blank line */
        out[k].b = b;
        out[k].e = p;
        if (k + 1 < width) {
            if (p >= end || *p != ' ')
                return 0;
            p++;
        } else if (p < end) {
            if (*p != '\n')
                return 0;
            p++;
        }
    }
    *pos = p;
    return 1;
}

static Py_ssize_t count_lines(const unsigned char *data, Py_ssize_t size) {
    Py_ssize_t n = 0;
    const unsigned char *p = data, *end = data + size;
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        n++;
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return n;
}

/* A score as float() reads it; 0 when it is not a finite number so written. */
static int parse_score(const unsigned char *b, const unsigned char *e, double *out) {
    const unsigned char *p = b;
    int neg = 0, digits = 0, frac = 0, dots = 0;
    int64_t mant = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; p < e; p++) {
        unsigned d = (unsigned)*p - '0';
        if (d < 10) {
            if (++digits > 15)
                goto slow;
            mant = mant * 10 + d;
            frac += dots;
        } else if (*p == '.' && !dots) {
            dots = 1;
        } else {
            goto slow;
        }
    }
    if (!digits)
        goto slow;
    {
        double v = (double)mant / POW10[frac];
        *out = neg ? -v : v;
        return 1;
    }
slow : {
    char buf[MAX_FIELD + 1];
    Py_ssize_t n = e - b;
    char *stop = NULL;
    double v;
    if (n > MAX_FIELD)
        return 0;
    memcpy(buf, b, (size_t)n);
    buf[n] = '\0';
    v = PyOS_string_to_double(buf, &stop, NULL);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (stop != buf + n || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}
}

/* A grade written [+-]?[0-9]{1,15}(\.0*)? (as trec.parse_relevance takes it); 0 otherwise. */
static int parse_grade(const unsigned char *b, const unsigned char *e, int64_t *out) {
    const unsigned char *p = b;
    int neg = 0, digits = 0;
    int64_t v = 0;
    if (*p == '-' || *p == '+') {
        neg = *p == '-';
        p++;
    }
    for (; p < e && (unsigned)*p - '0' < 10; p++) {
        if (++digits > 15)
            return 0;
        v = v * 10 + (*p - '0');
    }
    if (!digits)
        return 0;
    if (p < e) {
        if (*p != '.')
            return 0;
        for (p++; p < e; p++)
            if (*p != '0')
                return 0;
    }
    *out = neg ? -v : v;
    return 1;
}

/* ------------------------------------------------------------------ hashing byte strings */

static inline uint64_t hash_bytes(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 14695981039346656037ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 32);
}

/* An open-addressing set of rows (index + 1; 0 is empty), keyed by their docno's bytes. */
typedef struct {
    int64_t *slots;
    uint64_t mask;
} Table;

static int table_init(Table *t, Py_ssize_t most) {
    uint64_t cap = 16;
    while (cap < (uint64_t)most * 2)
        cap <<= 1;
    t->slots = PyMem_Calloc((size_t)cap, sizeof(int64_t));
    t->mask = cap - 1;
    return t->slots != NULL;
}

/* The table emptied for `used` entries: the mask of its first part, a power of two >= 2 * used
   (at most the whole table), so that a small query touches a small part of it. */
static uint64_t table_reset(Table *t, Py_ssize_t used) {
    uint64_t cap = 16;
    while (cap < (uint64_t)used * 2)
        cap <<= 1;
    if (cap > t->mask + 1)
        cap = t->mask + 1;
    memset(t->slots, 0, (size_t)cap * sizeof(int64_t));
    return cap - 1;
}

/* Row `row`'s docno raw[beg[row]:end[row]] put in the table; 0 when an equal docno is there. */
static int table_add(Table *t, uint64_t mask, const unsigned char *raw, const int64_t *beg,
                     const int64_t *end, int64_t row) {
    const unsigned char *s = raw + beg[row];
    Py_ssize_t n = (Py_ssize_t)(end[row] - beg[row]);
    uint64_t i = hash_bytes(s, n) & mask;
    for (;;) {
        int64_t at = t->slots[i];
        if (at == 0) {
            t->slots[i] = row + 1;
            return 1;
        }
        at--;
        if (end[at] - beg[at] == n && memcmp(raw + beg[at], s, (size_t)n) == 0)
            return 0;
        i = (i + 1) & mask;
    }
}

/* The row whose docno equals s[0:n], or -1. */
static int64_t table_find(const Table *t, uint64_t mask, const unsigned char *raw,
                          const int64_t *beg, const int64_t *end, const unsigned char *s,
                          Py_ssize_t n) {
    uint64_t i = hash_bytes(s, n) & mask;
    for (;;) {
        int64_t at = t->slots[i];
        if (at == 0)
            return -1;
        at--;
        if (end[at] - beg[at] == n && memcmp(raw + beg[at], s, (size_t)n) == 0)
            return at;
        i = (i + 1) & mask;
    }
}

/* ------------------------------------------------------------------ reading */

static PyObject *new_array(Py_ssize_t n, size_t item) {
    return PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)item);
}

#define ARRAY(obj, type) ((type *)PyByteArray_AS_STRING(obj))

/* What both formats share: lines split, each query's lines together (qids unique), no docno
   twice in a query. `value` parses field `vfield` of a line into values[i] (0: irregular). */
typedef int (*ValueFn)(const Field *f, char *values, Py_ssize_t i);

static int run_value(const Field *f, char *values, Py_ssize_t i) {
    /* rank (field 3): digits only; score (field 4) */
    if (f[3].e - f[3].b > MAX_FIELD || f[4].e - f[4].b > MAX_FIELD)
        return 0;
    for (const unsigned char *p = f[3].b; p < f[3].e; p++)
        if ((unsigned)*p - '0' >= 10)
            return 0;
    return parse_score(f[4].b, f[4].e, (double *)values + i);
}

static int qrels_value(const Field *f, char *values, Py_ssize_t i) {
    if (f[3].e - f[3].b > MAX_FIELD)
        return 0;
    return parse_grade(f[3].b, f[3].e, (int64_t *)values + i);
}

/* (qids, starts, values, docno begins, docno ends) or None. */
static PyObject *read_table(PyObject *raw, int width, ValueFn value) {
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(raw);
    Py_ssize_t size = PyBytes_GET_SIZE(raw);
    const unsigned char *p = data, *end = data + size;
    Field f[8];
    Py_ssize_t n, i = 0, nq = 0, most = 0;
    PyObject *values = NULL, *beg = NULL, *fin = NULL, *starts = NULL, *qids = NULL;
    PyObject *seen = NULL, *result = NULL;
    int64_t *first = NULL; /* the line where each query starts (n + 1 at most) */
    Table table = {NULL, 0};
    const unsigned char *qb = NULL, *qe = NULL;

    if (size == 0)
        Py_RETURN_NONE;
    n = count_lines(data, size);
    values = new_array(n, 8);
    beg = new_array(n, 8);
    fin = new_array(n, 8);
    first = PyMem_Malloc((size_t)(n + 1) * sizeof(int64_t));
    qids = PyList_New(0);
    if (!values || !beg || !fin || !first || !qids) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < n; i++) {
        if (!split_line(&p, end, width, f) || !value(f, PyByteArray_AS_STRING(values), i))
            goto irregular;
        if (qb == NULL || f[0].e - f[0].b != qe - qb ||
            memcmp(f[0].b, qb, (size_t)(qe - qb)) != 0) {
            PyObject *q;
            /* a line starting with '#' (a comment in trec_eval 10.0, data in 9.0.8; the line
               reader reads it as the version asked for): checked where a query starts, which
               covers every line, as each other line repeats its query's first bytes */
            if (f[0].e - f[0].b > MAX_FIELD || *f[0].b == '#')
                goto irregular;
            qb = f[0].b;
            qe = f[0].e;
            first[nq++] = i;
            q = PyUnicode_DecodeASCII((const char *)qb, qe - qb, NULL);
            if (q == NULL || PyList_Append(qids, q) < 0) {
                Py_XDECREF(q);
                goto done;
            }
            Py_DECREF(q);
        }
        ARRAY(beg, int64_t)[i] = f[2].b - data;
        ARRAY(fin, int64_t)[i] = f[2].e - data;
    }
    if (p != end)
        goto irregular; /* cannot happen: every line was read */
    first[nq] = n;
    seen = PySet_New(qids);
    if (seen == NULL)
        goto done;
    if (PySet_GET_SIZE(seen) != nq)
        goto irregular; /* a query's lines are not together */
    for (Py_ssize_t k = 0; k < nq; k++)
        if (first[k + 1] - first[k] > most)
            most = first[k + 1] - first[k];
    if (!table_init(&table, most)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < nq; k++) {
        Py_ssize_t used = (Py_ssize_t)(first[k + 1] - first[k]);
        uint64_t mask = table_reset(&table, used);
        for (int64_t r = first[k]; r < first[k + 1]; r++)
            if (!table_add(&table, mask, data, ARRAY(beg, int64_t), ARRAY(fin, int64_t), r))
                goto irregular; /* a document twice in a query */
    }
    starts = new_array(nq + 1, 8);
    if (starts == NULL)
        goto done;
    memcpy(PyByteArray_AS_STRING(starts), first, (size_t)(nq + 1) * sizeof(int64_t));
    result = Py_BuildValue("(OOOOO)", qids, starts, values, beg, fin);
    goto done;
irregular:
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(first);
    PyMem_Free(table.slots);
    Py_XDECREF(values);
    Py_XDECREF(beg);
    Py_XDECREF(fin);
    Py_XDECREF(starts);
    Py_XDECREF(qids);
    Py_XDECREF(seen);
    return result;
}

static PyObject *py_run(PyObject *self, PyObject *args) {
    PyObject *raw;
    if (!PyArg_ParseTuple(args, "S:run", &raw))
        return NULL;
    return read_table(raw, 6, run_value);
}

static PyObject *py_qrels(PyObject *self, PyObject *args) {
    PyObject *raw;
    if (!PyArg_ParseTuple(args, "S:qrels", &raw))
        return NULL;
    return read_table(raw, 4, qrels_value);
}

/* ------------------------------------------------------------------ buffers */

typedef struct {
    Py_buffer view;
    Py_ssize_t n; /* items */
} Buf;

static int get_buf(PyObject *obj, Buf *b, size_t item, const char *what) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS) < 0)
        return 0;
    if (b->view.len % (Py_ssize_t)item) {
        PyBuffer_Release(&b->view);
        PyErr_Format(PyExc_ValueError, "%s: not an array of %zu-byte items", what, item);
        return 0;
    }
    b->n = b->view.len / (Py_ssize_t)item;
    return 1;
}

#define I64(b) ((const int64_t *)(b).view.buf)
#define F64(b) ((const double *)(b).view.buf)

/* rows[i] (or i when there are no rows) checked against the bounds of beg/end. */
static int check_rows(const Buf *rows, int have_rows, Py_ssize_t limit) {
    if (!have_rows)
        return 1;
    for (Py_ssize_t i = 0; i < rows->n; i++)
        if (I64(*rows)[i] < 0 || I64(*rows)[i] >= limit) {
            PyErr_SetString(PyExc_IndexError, "row out of range");
            return 0;
        }
    return 1;
}

static int check_starts(const Buf *starts, Py_ssize_t limit) {
    const int64_t *s = I64(*starts);
    if (starts->n < 1 || s[0] != 0 || s[starts->n - 1] != limit) {
        PyErr_SetString(PyExc_ValueError, "starts do not cover the rows");
        return 0;
    }
    for (Py_ssize_t k = 1; k < starts->n; k++)
        if (s[k] < s[k - 1]) {
            PyErr_SetString(PyExc_ValueError, "starts are not ascending");
            return 0;
        }
    return 1;
}

/* Spans a..b of begins/ends lie in raw (a = 0, b = -1: all of them). */
static int check_spans(PyObject *raw, const Buf *beg, const Buf *end, Py_ssize_t a,
                       Py_ssize_t b) {
    Py_ssize_t size = PyBytes_GET_SIZE(raw);
    if (beg->n != end->n) {
        PyErr_SetString(PyExc_ValueError, "begins and ends differ in length");
        return 0;
    }
    if (b < 0)
        b = beg->n;
    for (Py_ssize_t i = a; i < b; i++)
        if (I64(*beg)[i] < 0 || I64(*beg)[i] > I64(*end)[i] || I64(*end)[i] > size) {
            PyErr_SetString(PyExc_ValueError, "a span lies outside the data");
            return 0;
        }
    return 1;
}

/* docnos(raw, begins, ends, rows or None, as_str) -> list of bytes (or str) */
static PyObject *py_docnos(PyObject *self, PyObject *args) {
    PyObject *raw, *obeg, *oend, *orows;
    int as_str;
    Buf beg, end, rows;
    int have_rows;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "SOOOp:docnos", &raw, &obeg, &oend, &orows, &as_str))
        return NULL;
    have_rows = orows != Py_None;
    if (!get_buf(obeg, &beg, 8, "begins"))
        return NULL;
    if (!get_buf(oend, &end, 8, "ends")) {
        PyBuffer_Release(&beg.view);
        return NULL;
    }
    if (have_rows && !get_buf(orows, &rows, 8, "rows")) {
        PyBuffer_Release(&beg.view);
        PyBuffer_Release(&end.view);
        return NULL;
    }
    if (check_spans(raw, &beg, &end, 0, -1) && check_rows(&rows, have_rows, beg.n)) {
        const char *data = PyBytes_AS_STRING(raw);
        Py_ssize_t n = have_rows ? rows.n : beg.n;
        out = PyList_New(n);
        for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
            int64_t r = have_rows ? I64(rows)[i] : i;
            const char *s = data + I64(beg)[r];
            Py_ssize_t len = (Py_ssize_t)(I64(end)[r] - I64(beg)[r]);
            PyObject *item = as_str ? PyUnicode_DecodeASCII(s, len, NULL)
                                    : PyBytes_FromStringAndSize(s, len);
            if (item == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, item);
        }
    }
    PyBuffer_Release(&beg.view);
    PyBuffer_Release(&end.view);
    if (have_rows)
        PyBuffer_Release(&rows.view);
    return out;
}

/* judgments(raw, begins, ends, grades, start, stop, as_str) -> {docno: grade} of rows
   start..stop, in file order */
static PyObject *py_judgments(PyObject *self, PyObject *args) {
    PyObject *raw, *obeg, *oend, *ograde;
    Py_ssize_t a, b;
    int as_str;
    Buf beg, end, grade;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "SOOOnnp:judgments", &raw, &obeg, &oend, &ograde, &a, &b,
                          &as_str))
        return NULL;
    if (!get_buf(obeg, &beg, 8, "begins"))
        return NULL;
    if (!get_buf(oend, &end, 8, "ends")) {
        PyBuffer_Release(&beg.view);
        return NULL;
    }
    if (!get_buf(ograde, &grade, 8, "grades")) {
        PyBuffer_Release(&beg.view);
        PyBuffer_Release(&end.view);
        return NULL;
    }
    if (a < 0 || b < a || b > beg.n || grade.n != beg.n) {
        PyErr_SetString(PyExc_IndexError, "rows out of range");
    } else if (check_spans(raw, &beg, &end, a, b)) {
        const char *data = PyBytes_AS_STRING(raw);
        out = PyDict_New();
        for (Py_ssize_t i = a; out != NULL && i < b; i++) {
            const char *s = data + I64(beg)[i];
            Py_ssize_t len = (Py_ssize_t)(I64(end)[i] - I64(beg)[i]);
            PyObject *key = as_str ? PyUnicode_DecodeASCII(s, len, NULL)
                                   : PyBytes_FromStringAndSize(s, len);
            PyObject *val = key ? PyLong_FromLongLong(I64(grade)[i]) : NULL;
            if (val == NULL || PyDict_SetItem(out, key, val) < 0)
                Py_CLEAR(out);
            Py_XDECREF(key);
            Py_XDECREF(val);
        }
    }
    PyBuffer_Release(&beg.view);
    PyBuffer_Release(&end.view);
    PyBuffer_Release(&grade.view);
    return out;
}

/* ------------------------------------------------------------------ ranking */

typedef struct {
    const double *keys;
    const int64_t *rows; /* NULL: row i is i */
    const unsigned char *raw;
    const int64_t *beg, *end;
} Order;

static Order ORDER; /* the comparison's context (qsort has none; the GIL is held) */

/* <0 when row a ranks before row b: key descending, then docno descending (strcmp order) */
static inline int rank_cmp(const Order *o, int64_t a, int64_t b) {
    double ka = o->keys[a], kb = o->keys[b];
    int64_t ra, rb;
    Py_ssize_t la, lb;
    int c;
    if (ka > kb)
        return -1;
    if (ka < kb)
        return 1;
    ra = o->rows ? o->rows[a] : a;
    rb = o->rows ? o->rows[b] : b;
    la = (Py_ssize_t)(o->end[ra] - o->beg[ra]);
    lb = (Py_ssize_t)(o->end[rb] - o->beg[rb]);
    c = memcmp(o->raw + o->beg[ra], o->raw + o->beg[rb], (size_t)(la < lb ? la : lb));
    if (c == 0)
        c = (la > lb) - (la < lb);
    if (c == 0) /* the same docno twice (not in a file read here): file order */
        return (a > b) - (a < b);
    return -c;
}

static int qsort_cmp(const void *x, const void *y) {
    return rank_cmp(&ORDER, *(const int64_t *)x, *(const int64_t *)y);
}

/* rank(keys, starts, rows or None, raw, begins, ends) -> int64 order: within each query
   (starts), the rows' indices by key descending, docno descending */
static PyObject *py_rank(PyObject *self, PyObject *args) {
    PyObject *okeys, *ostarts, *orows, *raw, *obeg, *oend;
    Buf keys, starts, rows, beg, end;
    int have_rows, got = 0;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "OOOSOO:rank", &okeys, &ostarts, &orows, &raw, &obeg, &oend))
        return NULL;
    have_rows = orows != Py_None;
    if (!get_buf(okeys, &keys, 8, "keys"))
        return NULL;
    got = 1;
    if (!get_buf(ostarts, &starts, 8, "starts"))
        goto release;
    got = 2;
    if (have_rows && !get_buf(orows, &rows, 8, "rows"))
        goto release;
    got = 3;
    if (!get_buf(obeg, &beg, 8, "begins"))
        goto release;
    got = 4;
    if (!get_buf(oend, &end, 8, "ends"))
        goto release;
    got = 5;
    if (!check_spans(raw, &beg, &end, 0, -1) || !check_starts(&starts, keys.n) ||
        !check_rows(&rows, have_rows, beg.n))
        goto release;
    if (have_rows ? rows.n != keys.n : beg.n != keys.n) {
        PyErr_SetString(PyExc_ValueError, "keys and rows differ in length");
        goto release;
    }
    for (Py_ssize_t i = 0; i < keys.n; i++)
        if (isnan(F64(keys)[i])) {
            PyErr_SetString(PyExc_ValueError, "a key is NaN");
            goto release;
        }
    out = new_array(keys.n, 8);
    if (out == NULL)
        goto release;
    {
        int64_t *order = ARRAY(out, int64_t);
        Order o = {F64(keys), have_rows ? I64(rows) : NULL,
                   (const unsigned char *)PyBytes_AS_STRING(raw), I64(beg), I64(end)};
        for (Py_ssize_t i = 0; i < keys.n; i++)
            order[i] = i;
        for (Py_ssize_t k = 0; k + 1 < starts.n; k++) {
            int64_t a = I64(starts)[k], b = I64(starts)[k + 1];
            int64_t i = a;
            while (i + 1 < b && rank_cmp(&o, i, i + 1) < 0)
                i++;
            if (i + 1 >= b)
                continue; /* in trec_eval's order already (the usual run file) */
            ORDER = o;
            qsort(order + a, (size_t)(b - a), sizeof(int64_t), qsort_cmp);
        }
    }
release:
    if (got >= 1)
        PyBuffer_Release(&keys.view);
    if (got >= 2)
        PyBuffer_Release(&starts.view);
    if (got >= 3 && have_rows)
        PyBuffer_Release(&rows.view);
    if (got >= 4)
        PyBuffer_Release(&beg.view);
    if (got >= 5)
        PyBuffer_Release(&end.view);
    return out;
}

/* grades(run_raw, run_begins, run_ends, rows or None, starts, qrels_raw, qrels_begins,
   qrels_ends, qrels_grades, qrels_starts, which, missing) -> int64 grade of each row: query k
   (rows starts[k]:starts[k + 1]) is judged by qrels query which[k] (-1: none); a document
   that query does not judge gets `missing` */
static PyObject *py_grades(PyObject *self, PyObject *args) {
    PyObject *rraw, *orbeg, *orend, *orows, *ostarts, *qraw, *oqbeg, *oqend, *oqgrade, *oqstarts,
        *owhich;
    long long missing;
    Buf rbeg, rend, rows, starts, qbeg, qend, qgrade, qstarts, which;
    Buf *bufs[9] = {&rbeg, &rend, &rows, &starts, &qbeg, &qend, &qgrade, &qstarts, &which};
    int held[9] = {0};
    int have_rows;
    PyObject *out = NULL;
    Table table = {NULL, 0};
    if (!PyArg_ParseTuple(args, "SOOOOSOOOOOL:grades", &rraw, &orbeg, &orend, &orows, &ostarts,
                          &qraw, &oqbeg, &oqend, &oqgrade, &oqstarts, &owhich, &missing))
        return NULL;
    have_rows = orows != Py_None;
    {
        PyObject *objs[9] = {orbeg, orend, orows, ostarts, oqbeg, oqend, oqgrade, oqstarts, owhich};
        for (int j = 0; j < 9; j++) {
            if (j == 2 && !have_rows)
                continue;
            if (!get_buf(objs[j], bufs[j], 8, "array"))
                goto release;
            held[j] = 1;
        }
    }
    {
        Py_ssize_t n = have_rows ? rows.n : rbeg.n;
        Py_ssize_t nq = starts.n - 1, qn = qstarts.n - 1, most = 0;
        if (!check_spans(rraw, &rbeg, &rend, 0, -1) ||
            !check_spans(qraw, &qbeg, &qend, 0, -1) ||
            !check_rows(&rows, have_rows, rbeg.n) || !check_starts(&starts, n) ||
            !check_starts(&qstarts, qbeg.n))
            goto release;
        if (which.n != nq || qgrade.n != qbeg.n) {
            PyErr_SetString(PyExc_ValueError, "which or grades: wrong length");
            goto release;
        }
        for (Py_ssize_t k = 0; k < nq; k++) {
            int64_t j = I64(which)[k];
            if (j < -1 || j >= qn) {
                PyErr_SetString(PyExc_IndexError, "qrels query out of range");
                goto release;
            }
            if (j >= 0 && I64(qstarts)[j + 1] - I64(qstarts)[j] > most)
                most = (Py_ssize_t)(I64(qstarts)[j + 1] - I64(qstarts)[j]);
        }
        if (!table_init(&table, most)) {
            PyErr_NoMemory();
            goto release;
        }
        out = new_array(n, 8);
        if (out == NULL)
            goto release;
        {
            int64_t *g = ARRAY(out, int64_t);
            const unsigned char *rd = (const unsigned char *)PyBytes_AS_STRING(rraw);
            const unsigned char *qd = (const unsigned char *)PyBytes_AS_STRING(qraw);
            for (Py_ssize_t k = 0; k < nq; k++) {
                int64_t j = I64(which)[k], a = I64(starts)[k], b = I64(starts)[k + 1];
                uint64_t mask = 0;
                if (j < 0) {
                    for (int64_t i = a; i < b; i++)
                        g[i] = missing;
                    continue;
                }
                {
                    Py_ssize_t used = (Py_ssize_t)(I64(qstarts)[j + 1] - I64(qstarts)[j]);
                    mask = table_reset(&table, used);
                }
                for (int64_t r = I64(qstarts)[j]; r < I64(qstarts)[j + 1]; r++)
                    table_add(&table, mask, qd, I64(qbeg), I64(qend), r); /* docnos unique */
                for (int64_t i = a; i < b; i++) {
                    int64_t r = have_rows ? I64(rows)[i] : i;
                    int64_t at = table_find(&table, mask, qd, I64(qbeg), I64(qend),
                                            rd + I64(rbeg)[r],
                                            (Py_ssize_t)(I64(rend)[r] - I64(rbeg)[r]));
                    g[i] = at < 0 ? missing : I64(qgrade)[at];
                }
            }
        }
    }
release:
    PyMem_Free(table.slots);
    for (int j = 0; j < 9; j++)
        if (held[j])
            PyBuffer_Release(&bufs[j]->view);
    return out;
}

static PyMethodDef METHODS[] = {
    {"run", py_run, METH_VARARGS,
     "run(raw) -> (qids, starts, scores, docno begins, docno ends) of a regular run, or None"},
    {"qrels", py_qrels, METH_VARARGS,
     "qrels(raw) -> (qids, starts, grades, docno begins, docno ends) of regular qrels, or "
     "None"},
    {"docnos", py_docnos, METH_VARARGS,
     "docnos(raw, begins, ends, rows, as_str) -> the docnos of rows (None: all) as a list"},
    {"judgments", py_judgments, METH_VARARGS,
     "judgments(raw, begins, ends, grades, start, stop, as_str) -> {docno: grade}"},
    {"rank", py_rank, METH_VARARGS,
     "rank(keys, starts, rows, raw, begins, ends) -> each query's rows, key then docno "
     "descending"},
    {"grades", py_grades, METH_VARARGS,
     "grades(run_raw, begins, ends, rows, starts, qrels_raw, begins, ends, grades, starts, "
     "which, missing) -> the grade of every row"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_trecread",
    "Regular TREC runs and qrels read, ranked and joined in compiled code (see cmrkit.trec).",
    -1, METHODS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__trecread(void) {
    init_classes();
    PyObject *module = PyModule_Create(&MODULE);
#ifdef CMRKIT_TRECREAD_SHA256
    /* the sha256 of this file when it was built (setup.py): cmrkit.trec checks it */
    if (module != NULL &&
        PyModule_AddStringConstant(module, "SOURCE_SHA256", CMRKIT_TRECREAD_SHA256) < 0) {
        Py_DECREF(module);
        return NULL;
    }
#endif
    return module;
}
