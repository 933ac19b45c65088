/* The hot path of a kernel launch, in C: optional, built at install time when a C compiler is
 * present (setup.py); without it opus launches through the generated Python path alone.
 *
 * A FastLaunch object belongs to one launch entry (frontend/gpu_launch.py). Called with
 * (launcher, args, smem, stream) it reads the kernel's arguments, packs them and calls
 * cuLaunchKernelEx. It handles only the common, valid case and never raises for bad input:
 * whatever it does not recognise (another array type, a wrong dtype or device, a misaligned
 * or out-of-range value, a stream it cannot read, another thread, a failed launch) goes to
 * the entry's Python launch function with the same arguments, which launches or raises an
 * error that names the parameter. So behaviour is defined in one place, the Python path, and
 * this file only makes its most common case cheaper: ~1 us of ctypes and interpreter work per
 * launch (benchmarks/launch_paths.py measures both).
 *
 * What each parameter is comes from the entry's LaunchPlan (runtime/launch_plan.py), as the
 * table LaunchPlan.c_table writes: a header (version, record size), then one ParamRecord per
 * parameter. Kinds are matched by name (KINDS below, exported), so the plan is the one
 * declaration; a plan with a kind missing here simply gets no C path.
 *
 * Recognised arguments: torch tensors (exact torch.Tensor or nn.Parameter) and CuPy arrays
 * (exact ndarray), types handed over by the entry once seen, whose dtype object is the
 * parameter's and whose device is the entry's; plain ints as raw addresses; Python ints,
 * floats and bools for scalar parameters in range; exact bytes of the declared size for
 * by-value structs; streams as None, an int handle, or an object with an int .cuda_stream
 * (torch), .ptr (CuPy) or .handle (launch_plan.stream_handle's rule).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <float.h>

/* Bumped with every change of what Python hands over or calls here; gpu_launch.py ignores a
 * module built from another version (a build left over from older sources). */
#define FASTLAUNCH_VERSION 4  /* launch_plan.C_ABI_VERSION */

#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#endif

typedef int (*launch_ex_fn)(void *config, void *function, void **params, void **extra);

/* CUlaunchConfig (cuda.h, CUDA >= 12.0), no launch attributes */
typedef struct {
    unsigned int grid[3], block[3], smem;
    void *stream;
    void *attrs;
    unsigned int nattrs;
} LaunchConfig;

/* parameter kinds, known to Python by the names in KINDS (module init) */
enum { K_PTR = 0, K_INT = 1, K_BOOL = 2, K_F32 = 3, K_F64 = 4, K_BYTES = 5, K_COUNT };
static const char *const kind_names[K_COUNT] = {"ptr", "int", "bool", "f32", "f64", "bytes"};

/* one parameter of the table LaunchPlan.c_table writes (its C_RECORD, "=iiqqqqQ") */
typedef struct {
    int32_t kind, arg;
    int64_t offset, size, lo, hi;
    uint64_t align;
} ParamRecord;

/* the table's header (launch_plan.C_HEADER, "=ii") */
typedef struct {
    int32_t version, record_size;
} TableHeader;

typedef struct {
    int kind;
    Py_ssize_t arg;         /* position in the argument tuple */
    Py_ssize_t offset;      /* into the parameter buffer */
    Py_ssize_t size;        /* bytes, for K_INT and K_BYTES */
    long long lo, hi;       /* accepted range, for K_INT */
    uint64_t align_mask;    /* for K_PTR */
    PyObject *torch_dtype;  /* for K_PTR, once torch is adopted (borrowed from dtypes tuple) */
    PyObject *cupy_dtype;   /* for K_PTR, once CuPy is adopted (borrowed likewise) */
} Param;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    launch_ex_fn launch;
    void *function;
    PyObject *fallback;      /* the entry's Python launch function: same signature */
    unsigned long owner;     /* thread that owns the buffers below */
    PyObject *device;        /* int: the entry's device index */
    long device_index;
    PyObject *tensor_type, *param_type, *torch_dtypes, *raw_stream;  /* torch, once adopted */
    PyObject *cupy_type, *cupy_dtypes;                   /* CuPy, once adopted */
    PyObject *last_launcher;
    long long smem_max;      /* dynamic shared memory launchable without the Python checks */
    Py_ssize_t nargs;        /* the argument tuple reaches at least this far */
    Py_ssize_t nparams;
    int first_ptr;           /* parameter index of the first pointer, -1 if none */
    Param *params;
    void **param_ptrs;
    uint64_t *buffer;        /* 8-byte aligned parameter storage */
    LaunchConfig config;
} FastLaunch;

static PyObject *s_dtype, *s_get_device, *s_data_ptr, *s_data, *s_ptr, *s_device_id, *s_cuda_stream;
static PyObject *s_handle, *s_stream_attrs[3];

static PyObject *call_method0(PyObject *obj, PyObject *name)
{
    PyObject *stack[2] = {NULL, obj};
    return PyObject_VectorcallMethod(name, stack + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Consumes `obj` (a new reference, or NULL after a failed call): 1 and *out set when it is an
 * exact int in 0..2^64-1, else 0 (an exception may be left set: the caller clears it). */
static int as_u64(PyObject *obj, uint64_t *out)
{
    if (obj == NULL)
        return 0;
    int ok = PyLong_CheckExact(obj);
    if (ok) {
        *out = PyLong_AsUnsignedLongLong(obj);
        ok = !(*out == (uint64_t)-1 && PyErr_Occurred());
    }
    Py_DECREF(obj);
    return ok;
}

static int same_device(FastLaunch *s, PyObject *index)
{
    if (index == NULL)
        return 0;
    int ok = PyLong_CheckExact(index) && PyLong_AsLong(index) == s->device_index;
    Py_DECREF(index);
    return ok;
}

static int attr_is(PyObject *obj, PyObject *name, PyObject *want)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return 0;
    Py_DECREF(v);
    return v == want;
}

/* The device address of pointer argument `a`: 1 if recognised, 0 for the Python path.
 * *torch is set when `a` is a torch tensor (its stream rule applies). */
static int pointer_of(FastLaunch *s, Param *p, PyObject *a, uint64_t *out, int *torch)
{
    PyTypeObject *t = Py_TYPE(a);
    *torch = 0;
    if (s->tensor_type != NULL &&
        (t == (PyTypeObject *)s->tensor_type || t == (PyTypeObject *)s->param_type)) {
        *torch = 1;
        if (p->torch_dtype == Py_None || !attr_is(a, s_dtype, p->torch_dtype))
            return 0;
        if (!same_device(s, call_method0(a, s_get_device)))
            return 0;
        if (!as_u64(call_method0(a, s_data_ptr), out))
            return 0;
    } else if (s->cupy_type != NULL && t == (PyTypeObject *)s->cupy_type) {
        if (p->cupy_dtype == Py_None || !attr_is(a, s_dtype, p->cupy_dtype))
            return 0;
        PyObject *mem = PyObject_GetAttr(a, s_data);
        if (mem == NULL)
            return 0;
        int ok = same_device(s, PyObject_GetAttr(mem, s_device_id)) &&
                 as_u64(PyObject_GetAttr(mem, s_ptr), out);
        Py_DECREF(mem);
        if (!ok)
            return 0;
    } else if (PyLong_CheckExact(a)) {
        Py_INCREF(a);
        if (!as_u64(a, out))  /* negative or beyond 64 bits: the Python path says so */
            return 0;
    } else {
        return 0;
    }
    return (*out & p->align_mask) == 0;
}

static int scalar_of(Param *p, PyObject *a, unsigned char *dst)
{
    switch (p->kind) {
    case K_INT: {
        if (!PyLong_CheckExact(a))
            return 0;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred()) || v < p->lo || v > p->hi)
            return 0;
        switch (p->size) {  /* little-endian hosts: the low bytes are the value */
        case 1: { int8_t x = (int8_t)v; memcpy(dst, &x, 1); break; }
        case 2: { int16_t x = (int16_t)v; memcpy(dst, &x, 2); break; }
        case 4: { int32_t x = (int32_t)v; memcpy(dst, &x, 4); break; }
        default: memcpy(dst, &v, 8);
        }
        return 1;
    }
    case K_BOOL:
        if (a != Py_True && a != Py_False)
            return 0;
        *dst = a == Py_True;
        return 1;
    case K_F32: {
        if (!PyFloat_CheckExact(a))
            return 0;
        double v = PyFloat_AS_DOUBLE(a);
        if (fabs(v) > FLT_MAX && !isinf(v))  /* would round to inf: the Python path refuses it */
            return 0;
        float x = (float)v;
        memcpy(dst, &x, 4);
        return 1;
    }
    case K_F64: {
        if (!PyFloat_CheckExact(a))
            return 0;
        double v = PyFloat_AS_DOUBLE(a);
        memcpy(dst, &v, 8);
        return 1;
    }
    case K_BYTES:  /* a by-value struct: exact bytes of its size (anything else: Python) */
        if (!PyBytes_CheckExact(a) || PyBytes_GET_SIZE(a) != p->size)
            return 0;
        memcpy(dst, PyBytes_AS_STRING(a), p->size);
        return 1;
    }
    return 0;
}

static int read_dim3(PyObject *launcher, const char *name, unsigned int dst[3])
{
    PyObject *t = PyObject_GetAttrString(launcher, name);
    if (t == NULL)
        return 0;
    int ok = PyTuple_CheckExact(t) && PyTuple_GET_SIZE(t) == 3;
    for (int i = 0; ok && i < 3; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, i));
        ok = !(v == (unsigned long)-1 && PyErr_Occurred()) && v <= 0xffffffffUL;
        dst[i] = (unsigned int)v;
    }
    Py_DECREF(t);
    return ok;
}

/* Everything but the driver call; 1 if the launch can go ahead from here. */
static int prepare(FastLaunch *s, PyObject *const *argv)
{
    PyObject *launcher = argv[0], *args = argv[1], *smem = argv[2], *stream = argv[3];
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) < s->nargs)
        return 0;
    if (PyThread_get_thread_ident() != s->owner)
        return 0;  /* the buffers below belong to the owner thread */
    unsigned char *buf = (unsigned char *)s->buffer;
    int first_is_torch = 0, other_torch = 0;
    for (Py_ssize_t i = 0; i < s->nparams; i++) {
        Param *p = &s->params[i];
        PyObject *a = PyTuple_GET_ITEM(args, p->arg);
        if (p->kind == K_PTR) {
            uint64_t v;
            int torch;
            if (!pointer_of(s, p, a, &v, &torch))
                return 0;
            memcpy(buf + p->offset, &v, 8);
            if (i == s->first_ptr)
                first_is_torch = torch;
            else
                other_torch |= torch;
        } else if (!scalar_of(p, a, buf + p->offset)) {
            return 0;
        }
    }
    /* shared memory: within what the entry has already checked and opted in to */
    if (!PyLong_CheckExact(smem))
        return 0;
    long long sm = PyLong_AsLongLong(smem);
    if (sm < 0 || sm > s->smem_max)
        return 0;
    /* stream: the one given as an int handle; else torch's current stream when the first
     * pointer is a torch tensor; else the legacy default stream (as EntryParams.stream) */
    void *h = NULL;
    if (stream == Py_None) {
        if (first_is_torch) {
            PyObject *r = PyObject_CallOneArg(s->raw_stream, s->device);
            uint64_t v;
            if (!as_u64(r, &v))
                return 0;
            h = (void *)(uintptr_t)v;
        } else if (other_torch) {
            return 0;  /* a torch tensor further on decides the stream: the Python path */
        }
    } else {
        /* launch_plan.stream_handle's rule: an int handle, else the first of .cuda_stream
         * (torch), .ptr (CuPy), .handle the object has; a value that is not an exact int in
         * range goes to Python, which applies the whole rule */
        uint64_t v;
        PyObject *handle = NULL;
        if (PyLong_CheckExact(stream))
            handle = Py_NewRef(stream);
        for (int i = 0; handle == NULL && i < 3; i++) {
            handle = PyObject_GetAttr(stream, s_stream_attrs[i]);
            if (handle == NULL)
                PyErr_Clear();
        }
        if (!as_u64(handle, &v))
            return 0;
        h = (void *)(uintptr_t)v;
    }
    if (launcher != s->last_launcher) {
        if (!read_dim3(launcher, "grid", s->config.grid) ||
            !read_dim3(launcher, "block", s->config.block)) {
            Py_CLEAR(s->last_launcher);
            return 0;
        }
        Py_INCREF(launcher);
        Py_XSETREF(s->last_launcher, launcher);
    }
    s->config.smem = (unsigned int)sm;
    s->config.stream = h;
    return 1;
}

static PyObject *fastlaunch_vectorcall(PyObject *self, PyObject *const *argv, size_t nargsf,
                                       PyObject *kwnames)
{
    FastLaunch *s = (FastLaunch *)self;
    if (PyVectorcall_NARGS(nargsf) == 4 && kwnames == NULL) {
        if (prepare(s, argv)) {
            int code;
            Py_BEGIN_ALLOW_THREADS
            code = s->launch(&s->config, s->function, s->param_ptrs, NULL);
            Py_END_ALLOW_THREADS
            if (code == 0)
                Py_RETURN_NONE;
            /* failed: the Python path launches again and handles or reports the error */
        }
        if (PyErr_Occurred())
            PyErr_Clear();  /* an accessor raised: the Python path will meet it and say why */
    }
    if (s->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "FastLaunch: used after it was cleared");
        return NULL;
    }
    return PyObject_Vectorcall(s->fallback, argv, nargsf, kwnames);
}

/* bytes a parameter's value takes in the buffer; 0 for an impossible integer size */
static Py_ssize_t value_width(const Param *p)
{
    switch (p->kind) {
    case K_INT:
        return (p->size == 1 || p->size == 2 || p->size == 4 || p->size == 8) ? p->size : 0;
    case K_BYTES: return p->size > 0 ? p->size : 0;
    case K_BOOL: return 1;
    case K_F32: return 4;
    default: return 8;
    }
}

/* -- construction and the entry's hand-overs ------------------------------------------------ */

static PyTypeObject FastLaunchType;

/* The parameter count of a table (LaunchPlan.c_table), or -1 with ValueError set when its
 * version or record size is not this module's. */
static Py_ssize_t table_count(const char *table, Py_ssize_t len)
{
    TableHeader head;
    if (len < (Py_ssize_t)sizeof head) {
        PyErr_SetString(PyExc_ValueError, "FastLaunch: the parameter table has no header");
        return -1;
    }
    memcpy(&head, table, sizeof head);
    if (head.version != FASTLAUNCH_VERSION || head.record_size != (int32_t)sizeof(ParamRecord) ||
        (len - (Py_ssize_t)sizeof head) % (Py_ssize_t)sizeof(ParamRecord) != 0) {
        PyErr_Format(PyExc_ValueError, "FastLaunch: parameter table of version %d with %d-byte "
                     "records; this module reads version %d, %d-byte records", head.version,
                     head.record_size, FASTLAUNCH_VERSION, (int)sizeof(ParamRecord));
        return -1;
    }
    return (len - (Py_ssize_t)sizeof head) / (Py_ssize_t)sizeof(ParamRecord);
}

/* new(launch_fn, function, table, buffer_size, nargs, fallback, owner, device, smem_max)
 * table: bytes, LaunchPlan.c_table (a header, then a ParamRecord per kernel parameter) */
static PyObject *fastlaunch_new(PyObject *module, PyObject *args)
{
    unsigned long long launch_fn, function, owner;
    Py_ssize_t buffer_size, nargs;
    PyObject *fallback;
    const char *table;
    Py_ssize_t table_len;
    long device;
    long long smem_max;
    if (!PyArg_ParseTuple(args, "KKy#nnOKlL", &launch_fn, &function, &table, &table_len,
                          &buffer_size, &nargs, &fallback, &owner, &device, &smem_max))
        return NULL;
    if (!launch_fn || !PyCallable_Check(fallback) || buffer_size < 0) {
        PyErr_SetString(PyExc_ValueError, "FastLaunch: bad launch function, fallback or size");
        return NULL;
    }
    Py_ssize_t n = table_count(table, table_len);
    if (n < 0)
        return NULL;
    FastLaunch *s = PyObject_GC_New(FastLaunch, &FastLaunchType);
    if (s == NULL)
        return NULL;
    s->vectorcall = fastlaunch_vectorcall;
    s->launch = (launch_ex_fn)(uintptr_t)launch_fn;
    s->function = (void *)(uintptr_t)function;
    s->fallback = Py_NewRef(fallback);
    s->owner = (unsigned long)owner;
    s->device = PyLong_FromLong(device);
    s->device_index = device;
    s->tensor_type = s->param_type = s->torch_dtypes = s->raw_stream = NULL;
    s->cupy_type = s->cupy_dtypes = s->last_launcher = NULL;
    s->smem_max = smem_max;
    s->nargs = nargs;
    s->nparams = n;
    s->first_ptr = -1;
    s->params = PyMem_Calloc(n ? n : 1, sizeof(Param));
    s->param_ptrs = PyMem_Calloc(n ? n : 1, sizeof(void *));
    s->buffer = PyMem_Calloc((buffer_size + 7) / 8 + 1, 8);
    memset(&s->config, 0, sizeof s->config);
    PyObject_GC_Track(s);
    if (!s->device || !s->params || !s->param_ptrs || !s->buffer) {
        Py_DECREF(s);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Param *p = &s->params[i];
        ParamRecord r;
        memcpy(&r, table + sizeof(TableHeader) + i * sizeof r, sizeof r);
        p->kind = r.kind;
        p->arg = (Py_ssize_t)r.arg;
        p->offset = (Py_ssize_t)r.offset;
        p->size = (Py_ssize_t)r.size;
        p->lo = r.lo;
        p->hi = r.hi;
        if (p->kind < 0 || p->kind >= K_COUNT || p->arg < 0 || p->arg >= nargs ||
            p->offset < 0 || r.size < 0 || r.size > buffer_size || value_width(p) == 0 ||
            p->offset + value_width(p) > buffer_size || r.align == 0 ||
            (r.align & (r.align - 1)) != 0) {
            PyErr_Format(PyExc_ValueError, "FastLaunch: bad parameter %zd", i);
            Py_DECREF(s);
            return NULL;
        }
        p->align_mask = r.align - 1;
        p->torch_dtype = p->cupy_dtype = Py_None;
        if (p->kind == K_PTR && s->first_ptr < 0)
            s->first_ptr = (int)i;
        s->param_ptrs[i] = (unsigned char *)s->buffer + p->offset;
    }
    return (PyObject *)s;
}

/* per pointer parameter, in order: the dtype object its arrays must have (None: never fast) */
static int take_dtypes(FastLaunch *s, PyObject *dtypes, int torch)
{
    if (!PyTuple_CheckExact(dtypes) || PyTuple_GET_SIZE(dtypes) != s->nparams) {
        PyErr_SetString(PyExc_ValueError, "dtypes: a tuple with one entry per parameter");
        return 0;
    }
    for (Py_ssize_t i = 0; i < s->nparams; i++) {
        PyObject *d = PyTuple_GET_ITEM(dtypes, i);
        if (torch)
            s->params[i].torch_dtype = d;
        else
            s->params[i].cupy_dtype = d;
    }
    return 1;
}

static PyObject *adopt_torch(PyObject *self, PyObject *args)
{
    FastLaunch *s = (FastLaunch *)self;
    PyObject *tensor_type, *param_type, *dtypes, *raw_stream;
    if (!PyArg_ParseTuple(args, "O!O!OO", &PyType_Type, &tensor_type, &PyType_Type, &param_type,
                          &dtypes, &raw_stream))
        return NULL;
    if (!take_dtypes(s, dtypes, 1))
        return NULL;
    Py_XSETREF(s->torch_dtypes, Py_NewRef(dtypes));
    Py_XSETREF(s->raw_stream, Py_NewRef(raw_stream));
    Py_XSETREF(s->tensor_type, Py_NewRef(tensor_type));
    Py_XSETREF(s->param_type, Py_NewRef(param_type));
    Py_RETURN_NONE;
}

static PyObject *adopt_cupy(PyObject *self, PyObject *args)
{
    FastLaunch *s = (FastLaunch *)self;
    PyObject *array_type, *dtypes;
    if (!PyArg_ParseTuple(args, "O!O", &PyType_Type, &array_type, &dtypes))
        return NULL;
    if (!take_dtypes(s, dtypes, 0))
        return NULL;
    Py_XSETREF(s->cupy_dtypes, Py_NewRef(dtypes));
    Py_XSETREF(s->cupy_type, Py_NewRef(array_type));
    Py_RETURN_NONE;
}

static int fastlaunch_traverse(FastLaunch *s, visitproc visit, void *arg)
{
    Py_VISIT(s->fallback);
    Py_VISIT(s->tensor_type);
    Py_VISIT(s->param_type);
    Py_VISIT(s->torch_dtypes);
    Py_VISIT(s->raw_stream);
    Py_VISIT(s->cupy_type);
    Py_VISIT(s->cupy_dtypes);
    Py_VISIT(s->last_launcher);
    return 0;
}

static int fastlaunch_clear(FastLaunch *s)
{
    /* the dtype pointers in params are borrowed from the tuples cleared here */
    for (Py_ssize_t i = 0; s->params && i < s->nparams; i++)
        s->params[i].torch_dtype = s->params[i].cupy_dtype = Py_None;
    Py_CLEAR(s->fallback);
    Py_CLEAR(s->tensor_type);
    Py_CLEAR(s->param_type);
    Py_CLEAR(s->torch_dtypes);
    Py_CLEAR(s->raw_stream);
    Py_CLEAR(s->cupy_type);
    Py_CLEAR(s->cupy_dtypes);
    Py_CLEAR(s->last_launcher);
    return 0;
}

static void fastlaunch_dealloc(FastLaunch *s)
{
    PyObject_GC_UnTrack(s);
    fastlaunch_clear(s);
    Py_CLEAR(s->device);
    PyMem_Free(s->params);
    PyMem_Free(s->param_ptrs);
    PyMem_Free(s->buffer);
    PyObject_GC_Del(s);
}

static PyMethodDef fastlaunch_methods[] = {
    {"adopt_torch", adopt_torch, METH_VARARGS,
     "adopt_torch(Tensor, Parameter, dtypes, raw_stream): recognise torch tensors from now on"},
    {"adopt_cupy", adopt_cupy, METH_VARARGS,
     "adopt_cupy(ndarray, dtypes): recognise CuPy arrays from now on"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef fastlaunch_members[] = {
    {"smem_max", T_LONGLONG, offsetof(FastLaunch, smem_max), 0,
     "dynamic shared memory (bytes) launchable without the Python path's checks"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject FastLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "opus._fastlaunch.FastLaunch",
    .tp_basicsize = sizeof(FastLaunch),
    .tp_dealloc = (destructor)fastlaunch_dealloc,
    .tp_vectorcall_offset = offsetof(FastLaunch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A launch entry's hot path: call(launcher, args, smem, stream)",
    .tp_traverse = (traverseproc)fastlaunch_traverse,
    .tp_clear = (inquiry)fastlaunch_clear,
    .tp_methods = fastlaunch_methods,
    .tp_members = fastlaunch_members,
};

/* -- LauncherBase: the memo hit of ``kernel[grid, block](*args)`` ---------------------------
 *
 * frontend/launch.py's CLauncher derives from this type. A call with positional arguments
 * (plus smem=/stream= keywords) whose count has a remembered (selection, run) pair, made under
 * that same target selection, calls run(launcher, args, smem, stream) from here; anything else
 * goes to the Python method _slow_call with the call as it came. The Python side records pairs
 * with _remember() and owns all the rules (which counts may be remembered, binding, errors).
 * The current selection is read as targeting.current_target() would: the calling context's
 * value of its _selected ContextVar, else the first of its _auto list (both handed over by
 * watch_selection). So the selection is per thread, and a memo entry made under another
 * thread's selection is never used here: the identity check below sends the call to Python. */

#define MEMO_N 64

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *memo_sel[MEMO_N];
    PyObject *memo_run[MEMO_N];
} LauncherBase;

static PyObject *sel_var, *sel_auto;  /* targeting._selected (a ContextVar) and targeting._auto */
static PyObject *s_smem, *s_stream, *s_slow_call, *zero;

/* Borrowed, for an identity check only; NULL: Python decides. The context keeps the value
 * alive while this C code runs (no Python code can set the variable in between). A context
 * variable's lookup is cached per thread, so a hit costs a few loads. */
static PyObject *current_selection(void)
{
    if (sel_var == NULL || sel_auto == NULL)
        return NULL;
    PyObject *sel;
    if (PyContextVar_Get(sel_var, NULL, &sel) < 0) {
        PyErr_Clear();
        return NULL;
    }
    if (sel != NULL) {
        Py_DECREF(sel);
        if (sel != Py_None)
            return sel;
    }
    return PyList_GET_SIZE(sel_auto) > 0 ? PyList_GET_ITEM(sel_auto, 0) : NULL;
}

static PyObject *launcher_slow(PyObject *self, PyObject *const *argv, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, total = 1 + nargs + nkw;
    PyObject *small[16], **stack = total <= 16 ? small : PyMem_Malloc(total * sizeof(PyObject *));
    if (stack == NULL)
        return PyErr_NoMemory();
    stack[0] = self;
    memcpy(stack + 1, argv, (nargs + nkw) * sizeof(PyObject *));
    PyObject *r = PyObject_VectorcallMethod(s_slow_call, stack, nargs + 1, kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return r;
}

static PyObject *launcher_vectorcall(PyObject *self, PyObject *const *argv, size_t nargsf,
                                     PyObject *kwnames)
{
    LauncherBase *s = (LauncherBase *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *smem = zero, *stream = Py_None;
    for (Py_ssize_t i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (name == s_smem || PyUnicode_Compare(name, s_smem) == 0)
            smem = argv[nargs + i];
        else if (name == s_stream || PyUnicode_Compare(name, s_stream) == 0)
            stream = argv[nargs + i];
        else
            return launcher_slow(self, argv, nargs, kwnames);  /* kernel arguments by name */
    }
    PyObject *sel;
    if (nargs >= MEMO_N || s->memo_run[nargs] == NULL || (sel = current_selection()) == NULL ||
        sel != s->memo_sel[nargs])
        return launcher_slow(self, argv, nargs, kwnames);
    PyObject *args = PyTuple_New(nargs);
    if (args == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(args, i, Py_NewRef(argv[i]));
    PyObject *run = Py_NewRef(s->memo_run[nargs]);  /* a _remember() inside run may replace it */
    PyObject *call[4] = {self, args, smem, stream};
    PyObject *r = PyObject_Vectorcall(run, call, 4, NULL);
    Py_DECREF(run);
    Py_DECREF(args);
    return r;
}

static PyObject *launcher_remember(PyObject *self, PyObject *args)
{
    LauncherBase *s = (LauncherBase *)self;
    Py_ssize_t n;
    PyObject *sel, *run;
    if (!PyArg_ParseTuple(args, "nOO", &n, &sel, &run))
        return NULL;
    if (n >= 0 && n < MEMO_N) {  /* more arguments than that: always the Python path */
        /* both set before either old value is released: a destructor run by the release
         * (it may switch threads) never sees a new selection paired with an old run */
        PyObject *old_sel = s->memo_sel[n], *old_run = s->memo_run[n];
        s->memo_sel[n] = Py_NewRef(sel);
        s->memo_run[n] = Py_NewRef(run);
        Py_XDECREF(old_sel);
        Py_XDECREF(old_run);
    }
    Py_RETURN_NONE;
}

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    LauncherBase *s = (LauncherBase *)type->tp_alloc(type, 0);  /* zero-filled */
    if (s != NULL)
        s->vectorcall = launcher_vectorcall;
    return (PyObject *)s;
}

static int launcher_traverse(LauncherBase *s, visitproc visit, void *arg)
{
    for (int i = 0; i < MEMO_N; i++) {
        Py_VISIT(s->memo_sel[i]);
        Py_VISIT(s->memo_run[i]);
    }
    return 0;
}

static int launcher_clear(LauncherBase *s)
{
    for (int i = 0; i < MEMO_N; i++) {
        Py_CLEAR(s->memo_sel[i]);
        Py_CLEAR(s->memo_run[i]);
    }
    return 0;
}

static void launcher_dealloc(LauncherBase *s)
{
    PyObject_GC_UnTrack(s);
    launcher_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef launcher_methods[] = {
    {"_remember", launcher_remember, METH_VARARGS,
     "_remember(nargs, selection, run): calls with nargs positional arguments under that "
     "selection go to run"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LauncherBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "opus._fastlaunch.LauncherBase",
    .tp_basicsize = sizeof(LauncherBase),
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_vectorcall_offset = offsetof(LauncherBase, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Base of frontend/launch.py's CLauncher: the memo hit of a launch in C",
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_clear,
    .tp_methods = launcher_methods,
    .tp_new = launcher_new,
};

static PyObject *watch_selection(PyObject *module, PyObject *args)
{
    PyObject *var, *autos;
    if (!PyArg_ParseTuple(args, "O!O!", &PyContextVar_Type, &var, &PyList_Type, &autos))
        return NULL;
    Py_XSETREF(sel_var, Py_NewRef(var));
    Py_XSETREF(sel_auto, Py_NewRef(autos));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"watch_selection", watch_selection, METH_VARARGS,
     "watch_selection(selected, auto): targeting's ContextVar of the explicit selection (None: "
     "automatic) and its list holding the automatic one (mutated in place, never rebound)"},
    {"new", fastlaunch_new, METH_VARARGS,
     "new(launch_fn, function, params, buffer_size, nargs, fallback, owner, device, smem_max)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "opus._fastlaunch",
    "C hot path of kernel launches (see frontend/gpu_launch.py)", -1, module_methods,
};

PyMODINIT_FUNC PyInit__fastlaunch(void)
{
    if (PyType_Ready(&FastLaunchType) < 0 || PyType_Ready(&LauncherBaseType) < 0)
        return NULL;
    s_dtype = PyUnicode_InternFromString("dtype");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_data = PyUnicode_InternFromString("data");
    s_ptr = PyUnicode_InternFromString("ptr");
    s_device_id = PyUnicode_InternFromString("device_id");
    s_cuda_stream = PyUnicode_InternFromString("cuda_stream");
    s_handle = PyUnicode_InternFromString("handle");
    s_stream_attrs[0] = s_cuda_stream;
    s_stream_attrs[1] = s_ptr;
    s_stream_attrs[2] = s_handle;
    s_smem = PyUnicode_InternFromString("smem");
    s_stream = PyUnicode_InternFromString("stream");
    s_slow_call = PyUnicode_InternFromString("_slow_call");
    zero = PyLong_FromLong(0);
    if (!s_dtype || !s_get_device || !s_data_ptr || !s_data || !s_ptr || !s_device_id ||
        !s_cuda_stream || !s_handle || !s_smem || !s_stream || !s_slow_call || !zero)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    PyObject *kinds = PyDict_New();
    int ok = m != NULL && kinds != NULL;
    for (int k = 0; ok && k < K_COUNT; k++) {
        PyObject *code = PyLong_FromLong(k);
        ok = code != NULL && PyDict_SetItemString(kinds, kind_names[k], code) == 0;
        Py_XDECREF(code);
    }
    if (!ok || PyModule_AddObjectRef(m, "KINDS", kinds) < 0 ||
        PyModule_AddObjectRef(m, "LauncherBase", (PyObject *)&LauncherBaseType) < 0 ||
        PyModule_AddIntConstant(m, "VERSION", FASTLAUNCH_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "MEMO_SIZE", MEMO_N) < 0)
        Py_CLEAR(m);
    Py_XDECREF(kinds);
    return m;
}
