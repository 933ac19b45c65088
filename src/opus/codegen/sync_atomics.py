"""Rendering of atomics and synchronization (ir/ops.py: atomic, spin_wait, sync_warp,
named_barrier, memory_fence, sched_hint, clock).

``SyncAtomicsRendering`` (mixed into CEmitter) owns what does not depend on the vendor: the
bound test, which atomics' results are used (NVIDIA renders ``red`` for the others), the spin
loop; the dialects spell the rest from their ``code_for_sync`` table and one ``atomic_call``
method each (PTX inline asm on NVIDIA; clang's ``__hip_atomic_*`` / ``__builtin_amdgcn_*``
and buffer-atomic intrinsics on AMD), because the two lowerings share nothing. What a chip
has was decided while tracing (targets/sync_atomics.py): the renderers only spell it.
"""
from __future__ import annotations

from ..ir import atomic_operands, VectorType, scalar_of

__all__ = ["SyncAtomicsRendering", "CudaAtomics", "HipAtomics"]


def _used_values(fn) -> set:
    """ids of the IR values some op of ``fn`` reads."""
    used = set()

    def walk(block):
        for op in block.ops:
            used.update(id(v) for v in op.operands)
            for r in op.regions:
                walk(r)
    walk(fn.body)
    return used


class SyncAtomicsRendering:
    """render_ methods of CEmitter for atomics and synchronization."""

    # the dialect's spellings: 'sync_warp' (template of {mask}), 'bar_sync' / 'bar_arrive'
    # ({id}, {count}), 'fence' {(scope, order): line}, 'clock' {which: expression},
    # 'hint' {name: template of the args {0} {1} {2}}
    code_for_sync: dict = {}

    def _result_used(self, op) -> bool:
        used = getattr(self, "_used_ids", None)
        if used is None:
            used = self._used_ids = _used_values(self.fn)
        return bool(op.results) and id(op.results[0]) in used

    def _sync_row(self, key, what):
        row = self.code_for_sync.get(key)
        if row is None:
            self._not_here(what, "the sync_atomics table")
        return row

    def render_atomic(self, op, indent):
        p, off, value, compare, bound = atomic_operands(op)
        used = self._result_used(op)
        a = op.attrs
        ptr = f"({self.name(p)} + {self.name(off)})"
        if a["vec"] > 1:  # a packed pair: its address as a pointer to the pair's struct
            ptr = f"(({self.ctype(VectorType(p.type.elem, a['vec']))}*){ptr})"
        args = [self.name(x) for x in (value, compare) if x is not None]  # HIP: (value, compare)
        r = op.results[0] if op.results else None
        if bound is None:
            call = self.atomic_call(op, ptr, p.type.space, args, used)
            if r is not None and used:
                self.assign_lanes(r, [call], indent)
            else:
                self.line(indent, f"{call};")
            return
        o, b = self.name(off), self.name(bound)
        cond = f"(long long){o} >= 0 && (long long){o} + {a['vec']} <= (long long){b}"
        if a.get("buffer"):  # the buffer unit drops out-of-range lanes; their result reads 0
            call = self.buffer_atomic_call(op, p, off, bound, args, indent)
            if r is not None and used:
                self.assign_lanes(r, [f"({cond}) ? {call} : {self.zero_of(r.type)}"], indent)
            return
        call = self.atomic_call(op, ptr, p.type.space, args, used)
        if r is None or not used:
            self.line(indent, f"if ({cond}) {call};")
            return
        self.assign_lanes(r, [f"({cond}) ? {call} : {self.zero_of(r.type)}"], indent)

    def zero_of(self, t):
        if isinstance(t, VectorType):
            return f"({self.ctype(t)}){{}}"
        return self.const_expr(0, t)

    def render_spin_wait(self, op, indent):
        p, off, v = op.operands
        e = scalar_of(p.type.elem) if hasattr(p.type.elem, "name") else p.type.elem
        ptr = f"({self.name(p)} + {self.name(off)})"
        load = self.atomic_load_relaxed(ptr, e)
        test = "!=" if op.attrs["cmp"] == "eq" else "<"
        self.line(indent, f"while ({load} {test} {self.name(v)}) {{ {self.spin_pause()} }}")
        self.line(indent, self._sync_row("fence", "a fence")[(op.attrs["scope"], "acq_rel")])

    def spin_pause(self):
        return ""

    def render_sync_warp(self, op, indent):
        self.line(indent, self._sync_row("sync_warp", "sync_warp").format(
            mask=self.name(op.operands[0])))

    def render_named_barrier(self, op, indent):
        key = "bar_arrive" if op.attrs["arrive"] else "bar_sync"
        ops = op.operands
        count = self.name(ops[1]) if op.attrs["counted"] else "(int)(" + " * ".join(
            self.block_size_along.format(a) for a in "xyz") + ")"
        self.line(indent, self._sync_row(key, "a named barrier").format(
            id=self.name(ops[0]), count=count))

    def render_memory_fence(self, op, indent):
        self.line(indent, self._sync_row("fence", "a fence")[(op.attrs["scope"], op.attrs["order"])])

    def render_sched_hint(self, op, indent):
        name = op.attrs["name"]
        self.line(indent, self._sync_row("hint", name)[name].format(*op.attrs["args"]))

    def render_clock(self, op, indent):
        which = op.attrs["which"]
        expr = self._sync_row("clock", which)[which]
        if expr.startswith("opus_"):  # a helper of the dialect's table
            self.use_helper(expr[:expr.index("(")])
        self.assign_lanes(op.results[0], [expr], indent)

    def buffer_atomic_call(self, op, p, off, bound, args, indent):
        self._not_here("a buffer atomic", "the sync_atomics table")


# -- NVIDIA: PTX atom / red / ld / st --------------------------------------------------------------
_PTX_SCOPE = {"block": ".cta", "device": ".gpu", "system": ".sys"}
_REG = {"i32": "r", "u32": "r", "i64": "l", "u64": "l", "f32": "f", "f64": "d"}


def _ptx_type(kind, key):
    if key in ("f16x2", "bf16x2"):
        return ".noftz." + key
    bits = 64 if key in ("i64", "u64", "f64") else 32
    if kind in ("and", "or", "xor", "exch", "cas", "load", "store"):
        return f".b{bits}"
    if kind == "add" and key == "i64":
        return ".u64"  # two's complement: the same bits as a u64 add
    return {"i32": ".s32", "u32": ".u32", "i64": ".s64", "u64": ".u64", "f32": ".f32",
            "f64": ".f64"}[key]


class CudaAtomics:
    """CudaEmitter's atomics: one helper per (op, type, order, scope, space, returning)."""

    def atomic_call(self, op, ptr, space, args, used):
        a = op.attrs
        kind, vec = a["op"], a["vec"]
        elem = op.operands[0].type.elem
        key = f"{elem.name}x2" if vec == 2 else elem.name
        reg = "r" if vec == 2 else _REG[key]
        ct = self.ctype(VectorType(elem, 2)) if vec == 2 else self.scalar_ctype(elem)
        word = "unsigned" if reg == "r" else {"l": "unsigned long long", "f": "float",
                                               "d": "double"}[reg]
        sp = ".global" if space != "shared" else ".shared::cta"
        sem, scope = "." + a["order"], _PTX_SCOPE[a["scope"]]
        addr = '"l"(p)' if space != "shared" else '"r"((unsigned)__cvta_generic_to_shared(p))'
        returning = used or kind in ("load", "exch", "cas")  # red has no exch or cas
        if kind == "cas":
            args = [args[1], args[0]]  # atom.cas d, [a], compare, new
        name = f"opus_{kind}_{key}_{a['order']}_{a['scope']}_{space}{'' if returning else '_red'}"
        n_in = len(args)
        params = ", ".join([f"{ct}* p"] + [f"{ct} x{i}" for i in range(n_in)])
        conv = (f"union {{ {ct} v; {word} w; }} " + ", ".join(
            f"u{i}" for i in range(n_in + 1)) + "; " + "".join(
            f"u{i + 1}.v = x{i}; " for i in range(n_in)))
        ins = ", ".join(f'"{reg}"(u{i + 1}.w)' for i in range(n_in))
        ptype = _ptx_type(kind, key)
        if kind == "load":
            text = f"ld{sem}{scope}{sp}{ptype} %0, [%1];"
            body = f'{conv}asm volatile("{text}" : "={reg}"(u0.w) : {addr} : "memory"); return u0.v;'
            return self.helper(name, f"{ct} {name}({params}) {{ {body} }}") + f"({ptr})"
        if kind == "store":
            text = f"st{sem}{scope}{sp}{ptype} [%0], %1;"
            body = f'{conv}asm volatile("{text}" :: {addr}, {ins} : "memory");'
            return self.helper(name, f"void {name}({params}) {{ {body} }}") + \
                f"({ptr}, {', '.join(args)})"
        if returning:
            ops = ", ".join(f"%{i + 2}" for i in range(n_in))
            text = f"atom{sem}{scope}{sp}.{kind}{ptype} %0, [%1], {ops};"
            body = (f'{conv}asm volatile("{text}" : "={reg}"(u0.w) : {addr}, {ins} : "memory"); '
                    f"return u0.v;")
            ret = ct
        else:
            ops = ", ".join(f"%{i + 1}" for i in range(n_in))
            red_sem = ".relaxed" if a["order"] == "acquire" else sem  # red has no acquire
            red_sem = ".release" if a["order"] == "acq_rel" else red_sem
            text = f"red{red_sem}{scope}{sp}.{kind}{ptype} [%0], {ops};"
            body = f'{conv}asm volatile("{text}" :: {addr}, {ins} : "memory");'
            ret = "void"
        fn = self.helper(name, f"{ret} {name}({params}) {{ {body} }}")
        return f"{fn}({ptr}, {', '.join(args)})"

    def atomic_load_relaxed(self, ptr, e):
        name = f"opus_ld_relaxed_{e.name}"
        self.helper(name, f"unsigned {name}(const unsigned* p) {{ unsigned r; asm volatile("
                          f'"ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(r) : "l"(p) : "memory"); '
                          f"return r; }}")
        return f"{name}({ptr})"


# -- AMD: clang's HIP atomic builtins, packed-add builtins, buffer-atomic intrinsics -------------------
_HIP_SCOPE = {"block": "__HIP_MEMORY_SCOPE_WORKGROUP", "device": "__HIP_MEMORY_SCOPE_AGENT",
              "system": "__HIP_MEMORY_SCOPE_SYSTEM"}
_HIP_SCOPE_NAME = {"block": "workgroup", "device": "agent", "system": ""}
_HIP_ORDER = {"relaxed": "__ATOMIC_RELAXED", "acquire": "__ATOMIC_ACQUIRE",
              "release": "__ATOMIC_RELEASE", "acq_rel": "__ATOMIC_ACQ_REL"}
_HIP_FETCH = {"add": "__hip_atomic_fetch_add", "min": "__hip_atomic_fetch_min",
              "max": "__hip_atomic_fetch_max", "and": "__hip_atomic_fetch_and",
              "or": "__hip_atomic_fetch_or", "xor": "__hip_atomic_fetch_xor",
              "exch": "__hip_atomic_exchange"}
_BUF_OP = {"add": "add", "and": "and", "or": "or", "xor": "xor", "exch": "swap", "cas": "cmpswap"}


def _fences(s, order, scope):
    """(line before, line after) a relaxed atomic: the fences that give it ``order``."""
    before = s.code_for_sync["fence"][(scope, "acq_rel")] if order in ("release", "acq_rel") else ""
    after = s.code_for_sync["fence"][(scope, "acq_rel")] if order in ("acquire", "acq_rel") else ""
    return before, after


class HipAtomics:
    """HipEmitter's atomics."""

    def atomic_call(self, op, ptr, space, args, used):
        a = op.attrs
        kind, vec = a["op"], a["vec"]
        elem = op.operands[0].type.elem
        order, scope = _HIP_ORDER[a["order"]], _HIP_SCOPE[a["scope"]]
        ct = self.ctype(VectorType(elem, 2)) if vec == 2 else self.scalar_ctype(elem)
        if vec == 2:
            return self._packed_add(ptr, space, elem, ct, args[0], a)
        if kind == "load":
            return f"__hip_atomic_load({ptr}, {order}, {scope})"
        if kind == "store":
            return f"__hip_atomic_store({ptr}, {args[0]}, {order}, {scope})"
        if kind in ("inc", "dec"):
            return (f"__builtin_amdgcn_atomic_{kind}32({ptr}, {args[0]}, {order}, "
                    f'"{_HIP_SCOPE_NAME[a["scope"]]}")')
        if kind == "cas":
            fail = "__ATOMIC_ACQUIRE" if a["order"] in ("acquire", "acq_rel") else "__ATOMIC_RELAXED"
            name = f"opus_cas_{elem.name}_{a['order']}_{a['scope']}"
            self.helper(name, f"{ct} {name}({ct}* p, {ct} c, {ct} v) {{ "
                              f"__hip_atomic_compare_exchange_strong(p, &c, v, {order}, {fail}, "
                              f"{scope}); return c; }}")
            return f"{name}({ptr}, {args[1]}, {args[0]})"
        return f"{_HIP_FETCH[kind]}({ptr}, {args[0]}, {order}, {scope})"

    def _packed_add(self, ptr, space, elem, ct, value, a):
        """global_atomic_pk_add_{f16,bf16} / ds_pk_add_*: builtins without order arguments, so
        the order's fences go around them (in a helper)."""
        h = "_Float16" if elem.name == "f16" else ("__bf16" if space != "shared" else "short")
        vt = f"opus_pk_{elem.name}_{'lds' if space == 'shared' else 'g'}_t"
        self.helpers[vt] = f"typedef {h} {vt} __attribute__((ext_vector_type(2)));"
        asp = 3 if space == "shared" else 1
        kind = "ds" if space == "shared" else "global"
        builtin = f"__builtin_amdgcn_{kind}_atomic_fadd_v2{'f16' if elem.name == 'f16' else 'bf16'}"
        before, after = _fences(self, a["order"], a["scope"])
        name = f"opus_pk_add_{elem.name}_{space}_{a['order']}_{a['scope']}"
        self.helper(name, f"{ct} {name}({ct}* p, {ct} x) {{ {before} {vt} r = {builtin}(("
                          f"__attribute__((address_space({asp}))) {vt}*)p, __builtin_bit_cast("
                          f"{vt}, x)); {after} return __builtin_bit_cast({ct}, r); }}")
        return f"{name}({ptr}, {value})"

    def atomic_load_relaxed(self, ptr, e):
        return f"__hip_atomic_load({ptr}, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT)"

    def spin_pause(self):
        return "__builtin_amdgcn_s_sleep(1);"

    def buffer_atomic_call(self, op, p, off, bound, args, indent):
        """buffer_atomic_* through a buffer resource whose num_records is the bound: the range
        check drops out-of-range lanes (their old value reads 0)."""
        a = op.attrs
        kind, vec = a["op"], a["vec"]
        elem = p.type.elem
        ct = self.ctype(VectorType(elem, 2)) if vec == 2 else self.scalar_ctype(elem)
        rsrc = self._rsrc(self.name(p), self.name(bound), elem.itemsize, indent)
        voff = self._voffset(off, elem.itemsize, bound)
        if vec == 2:
            ir, lt = f"fadd.v2{'f16' if elem.name == 'f16' else 'bf16'}", \
                f"{'_Float16' if elem.name == 'f16' else '__bf16'}"
            vt = f"opus_pk_{elem.name}_buf_t"
            self.helpers[vt] = f"typedef {lt} {vt} __attribute__((ext_vector_type(2)));"
        elif elem.is_float:
            ir = f"f{'add' if kind == 'add' else kind}.{elem.name}"
            vt = ct
        else:
            op_name = _BUF_OP.get(kind) or f"{'s' if elem.name[0] == 'i' else 'u'}{kind}"
            ir, vt = f"{op_name}.i32", "int"
        fn = f"opus_buf_atomic_{ir.replace('.', '_')}"
        extra = f"{vt}, " if kind == "cas" else ""
        self.helpers[fn] = (f"__attribute__((device)) {vt} {fn}({vt}, {extra}__amdgpu_buffer_rsrc_t, "
                            f'int, int, int) __asm("llvm.amdgcn.raw.ptr.buffer.atomic.{ir}");')
        vals = [f"__builtin_bit_cast({vt}, {x})" if vt != ct else x for x in args]
        if kind == "cas":
            vals = [vals[0], vals[1]]  # (new value, compare): the intrinsic's operand order
        before, after = _fences(self, a["order"], a["scope"])
        if before:
            self.line(indent, before)
        r = self.fresh(prefix="ba")
        self.line(indent, f"{vt} {r} = {fn}({', '.join(vals)}, {rsrc}, (int){voff}, 0, 0);")
        if after:
            self.line(indent, after)
        return f"__builtin_bit_cast({ct}, {r})" if vt != ct else r
