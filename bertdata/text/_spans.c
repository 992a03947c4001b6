/* The cleaner's splice (templates.py, wikitext.py): a page's text with spans of it replaced, which
 * it built with a sort on a Python key and a Python loop over every template and table. Plain
 * CPython C API over the str's own code points; _spans.pyi gives the signature.
 */

#include "_chars.h"

typedef struct {
    Py_ssize_t start, end, order; /* order: its place in the list, which breaks ties as a stable sort */
    PyObject *shown;              /* borrowed: a str, or None for nothing */
} Span;

static int by_start_then_longest(const void *a, const void *b)
{
    const Span *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Each span (start, end, shown) of text replaced by shown (None: nothing), a span inside another
 * going with it and two that overlap, neither inside the other, both going for nothing. */
static PyObject *fast_splice(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "spans", NULL};
    PyObject *text, *list;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO!:splice", kwlist, &text, &PyList_Type, &list))
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text), count = PyList_GET_SIZE(list);
    if (!count)
        return Py_NewRef(text);
    Span *spans = PyMem_Malloc(count * sizeof(Span));
    if (!spans)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PyList_GET_ITEM(list, k);
        Span *s = &spans[k];
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "nnO", &s->start, &s->end, &s->shown) ||
            s->start < 0 || s->end < s->start || s->end > n || (s->shown != Py_None && !PyUnicode_Check(s->shown))) {
            PyMem_Free(spans);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "spans[%zd]: %R is not (start, end, str or None) within the text",
                             k, item);
            return NULL;
        }
        s->order = k;
    }
    qsort(spans, (size_t)count, sizeof(Span), by_start_then_longest);
    /* The outermost spans, in order; an overlapping one widens the one it overlaps and blanks it. */
    Py_ssize_t kept = 0;
    int kind = PyUnicode_KIND(text);
    for (Py_ssize_t k = 0; k < count; k++) {
        Span *last = kept ? &spans[kept - 1] : NULL;
        if (last && spans[k].start < last->end) {
            if (spans[k].end > last->end) {
                last->end = spans[k].end;
                last->shown = Py_None;
            }
            continue;
        }
        spans[kept++] = spans[k];
    }
    Py_ssize_t len = n;
    for (Py_ssize_t k = 0; k < kept; k++) {
        PyObject *shown = spans[k].shown;
        len -= spans[k].end - spans[k].start;
        if (shown != Py_None) {
            /* Many empty spans at one place may each show a long str: their sum must not wrap. */
            if (PyUnicode_GET_LENGTH(shown) > PY_SSIZE_T_MAX / 4 - len) {
                PyMem_Free(spans);
                return PyErr_NoMemory();
            }
            len += PyUnicode_GET_LENGTH(shown);
            if (PyUnicode_KIND(shown) > kind)
                kind = PyUnicode_KIND(shown);
        }
    }
    char *out = PyMem_Malloc(len ? len * kind : 1);
    if (!out) {
        PyMem_Free(spans);
        return PyErr_NoMemory();
    }
    Py_ssize_t written = 0, pos = 0;
    for (Py_ssize_t k = 0; k < kept; k++) {
        copy_run(out, &written, kind, text, pos, spans[k].start);
        if (spans[k].shown != Py_None)
            copy_run(out, &written, kind, spans[k].shown, 0, PyUnicode_GET_LENGTH(spans[k].shown));
        pos = spans[k].end;
    }
    copy_run(out, &written, kind, text, pos, n);
    PyMem_Free(spans);
    PyObject *result = PyUnicode_FromKindAndData(kind, out, written);
    PyMem_Free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"splice", (PyCFunction)(void (*)(void))fast_splice, METH_VARARGS | METH_KEYWORDS,
     "splice(text, spans)\n--\n\n"
     "text with each span (start, end, shown) replaced by shown (None: nothing); a span inside\n"
     "another goes with it, two that overlap go for nothing."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bertdata.text._spans", "The wikitext cleaner's compiled splice.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__spans(void) { return PyModule_Create(&module); }
