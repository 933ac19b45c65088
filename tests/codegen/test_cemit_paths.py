"""Parts of codegen/cemit.py no host-executed test can reach: the async copies' commit and wait
lines (cp.async has no host shim; on AMD the wait is a no-op there), the base CEmitter's
defaults that both dialects override, and the renderers' internal refusals word for word
(issue 17.4: the mutants of cemit.py that no test reached)."""
import copy

import pytest

import opus
from opus import f16, f32, i32
from opus.codegen.cemit import CEmitter, CodegenError
from opus.codegen.cuda import CudaEmitter
from opus.codegen.hip import HipEmitter


def _body_lines(source):
    """The kernel's lines without the #line markers and Python-line comments."""
    return [l for l in source.splitlines() if not l.lstrip().startswith(("#line", "//"))]


@opus.kernel
def double_buffered(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 64)
    src = opus.make_gmem(x, 64 * n)
    opus.copy_async(tile, t, src, t)
    opus.commit_async()
    for k in opus.range(n):
        opus.copy_async(tile, 32 + t, src, 32 * k + t)
        opus.commit_async()
        opus.wait_async(1)
        y[t] = tile.load(t)


def test_cp_async_commit_and_wait_lines_where_written():
    lines = _body_lines(double_buffered.source(target="sm_80"))
    commit = 'asm volatile("cp.async.commit_group;" ::: "memory");'
    wait = 'asm volatile("cp.async.wait_group 1;" ::: "memory");'
    assert lines.count("  " + commit) == 1 and lines.count("    " + commit) == 1   # top, loop
    assert lines.count("    " + wait) == 1
    assert lines.index("    " + commit) + 1 == lines.index("    " + wait)


@opus.kernel
def lds_double_buffered(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 128)
    src = opus.make_gmem(x, 64 * n)
    for k in opus.range(n):
        opus.copy_async_lds(tile, 0, src, 64 * k + t)
        opus.commit_async()
        opus.wait_async(0)
        y[t] = tile.load(t)


def test_amd_async_wait_is_a_waitcnt_and_a_compiler_barrier():
    """gfx942: vmcnt(0) in s_waitcnt's encoding (vmcnt in bits 3:0 and 15:14, expcnt 6:4 and
    lgkmcnt 11:8 left at their maxima 7 and 15: 0x0F70); commits are nothing (groups are
    counted by the wait)."""
    lines = _body_lines(lds_double_buffered.source(target="gfx942"))
    at = lines.index("    __builtin_amdgcn_s_waitcnt(0xf70);")
    assert lines[at + 1] == '    __asm__ volatile("" ::: "memory");'


# -- the base emitter's defaults (each dialect overrides them) ----------------------------------

@opus.kernel
def casts(x: opus.Ptr[f32], y: opus.Ptr[i32]):
    t = opus.thread_id_x()
    y[t] = opus.cast(x[t], i32)


def _base(kernel, target, **constexprs):
    spec = kernel.specialize(target=target, **constexprs)
    return CEmitter(spec.function, spec.target)


def test_base_emitter_signature_and_float_to_int():
    src = _base(casts, "sm_80").render()
    assert "\nvoid casts_opus(float* p_x_1, int* p_y_2) {\n" in src   # no launch attributes
    assert "(int)(" in src and "__float2int" not in src and "cvt.rzi" not in src


@opus.kernel
def to_fp8(x: opus.Ptr[f32], y: opus.Ptr[opus.fp8_e4m3]):
    t = opus.thread_id_x()
    y[t] = opus.cast(x[t], opus.fp8_e4m3)


@opus.kernel
def stochastic_bf16(x: opus.Ptr[f32], r: opus.Ptr[opus.u32], y: opus.Ptr[opus.bf16]):
    t = opus.thread_id_x()
    y[t] = opus.cast(x[t], opus.bf16, rounding="sr", rbits=r[t])


@pytest.mark.parametrize("kernel,words", [
    (to_fp8, "internal: the c renderer has no storage conversions"),
    (stochastic_bf16, "internal: the c renderer has no stochastic rounding"),
])
def test_base_emitter_refuses_what_only_dialects_render(kernel, words):
    with pytest.raises(CodegenError) as info:
        _base(kernel, "sm_90a").render()
    assert info.value.raw_message == words


def test_base_emitter_renders_target_ops_through_structs():
    assert CEmitter.lanewise_target_op(None, "nv.wgmma.m64n8k16.f32.f16.f16") is False
    assert CudaEmitter.lanewise_target_op(None, "nv.wgmma.m64n8k16.f32.f16.f16") is True


# -- internal refusals, word for word --------------------------------------------------------

@opus.kernel
def exp_of(x: opus.Ptr[f32]):
    x[0] = opus.exp(x[0])


def test_math_function_without_a_name_for_the_backend(monkeypatch):
    table = {k: dict(v) for k, v in HipEmitter.code_for_math.items()}
    del table["f32"]["exp"]
    monkeypatch.setattr(HipEmitter, "code_for_math", table)
    with pytest.raises(CodegenError) as info:
        exp_of.source(target="gfx942")
    assert info.value.raw_message == ("internal: f32 exp reached the hip renderer for gfx942 "
                                      "(Target.math_f64 refuses it while tracing)")


@opus.kernel
def halves(x: opus.Ptr[f16]):
    x[0] = x[0] + x[1]


def test_helper_missing_from_the_dialects_table(monkeypatch):
    helpers = dict(CudaEmitter.helper_sources)
    del helpers["opus_h2f"]
    monkeypatch.setattr(CudaEmitter, "helper_sources", helpers)
    with pytest.raises(CodegenError) as info:
        halves.source(target="sm_80")
    assert info.value.raw_message == "internal: the cuda renderer has no helper opus_h2f"


@opus.kernel
def loads_matrices(x: opus.Ptr[f16]):
    tile = opus.alloc_smem(f16, 256)
    v = opus.ldmatrix(tile, opus.lane_id() * 8, num=4)
    x[opus.lane_id()] = v[0]


def test_target_op_without_a_lowering_for_the_backend(monkeypatch):
    from opus.targets import get_target
    t = get_target("sm_80")
    [name] = {op.attrs["name"] for op in loads_matrices.specialize(target="sm_80").function.walk()
              if op.kind == "target_op"}
    monkeypatch.delitem(t.instruction(name).lower, "cuda")
    loads_matrices._specs.clear()
    with pytest.raises(CodegenError) as info:
        loads_matrices.source(target="sm_80")
    assert info.value.raw_message == f"{name} has no cuda lowering"


@opus.kernel
def waits_only(x: opus.Ptr[f32]):
    opus.wait_async(0)
    x[0] = 1.0


def test_base_emitter_has_no_async_wait():
    with pytest.raises(CodegenError) as info:
        _base(waits_only, "sm_80").render()
    assert info.value.raw_message == ("internal: an async wait reached the c renderer for sm_80 "
                                      "(Target.wait rules refuses it while tracing)")


def test_a_value_used_before_its_definition_is_an_internal_error():
    from opus.ir.core import Value
    em, v = _base(casts, "sm_80"), Value(i32)
    with pytest.raises(CodegenError) as info:
        em.name(v)
    assert info.value.raw_message == f"internal: value {v!r} used before definition"


# -- constants by hand values (CEmitter.const_expr) --------------------------------------------

@pytest.mark.parametrize("x, e, want", [
    (0, opus.fp4_e2m1, "(unsigned char)0x0"), (-6.0, opus.fp4_e2m1, "(unsigned char)0xf"),
    (1.5, opus.fp4_e2m1, "(unsigned char)0x3"), (-0.5, opus.fp4_e2m1, "(unsigned char)0x9"),
    (-8, opus.int4, "(unsigned char)0x8"), (-1, opus.int4, "(unsigned char)0xf"),
    (7, opus.int4, "(unsigned char)0x7"), (15, opus.uint4, "(unsigned char)0xf"),
    (True, opus.bool_, "true"), (False, opus.bool_, "false"), (0, opus.bool_, "false"),
    (-5, i32, "-5"), (5, opus.u32, "5u"), (-5, opus.i64, "-5ll"), (5, opus.u64, "5ull"),
    (-(1 << 63), opus.i64, "(-9223372036854775807ll - 1)"), (-(1 << 31), i32, "(-2147483647 - 1)"),
    (-3, opus.i8, "(signed char)-3"),
    (1.0, f32, "0x1.0000000000000p+0f"), (-2.5, f32, "-0x1.4000000000000p+1f"),
    (0.0, f32, "0x0.0p+0f"), (-0.0, f32, "-0.0f"), (1.5, opus.f64, "0x1.8000000000000p+0"),
    (0.0, opus.f64, "0x0.0p+0"), (-0.0, opus.f64, "-0.0"),
    (1.0, f16, "(unsigned short)0x3c00"), (-2.0, opus.bf16, "(unsigned short)0xc000"),
    (1.0, opus.fp8_e4m3, "(unsigned char)0x38"), (-1.0, opus.fp8_e5m2, "(unsigned char)0xbc")])
def test_constants_are_spelled_with_their_codes_and_suffixes(x, e, want):
    """fp4 codes (E2M1: sign, 2 exponent, 1 mantissa bit) and int4 two's complement written
    out by hand; integer suffixes per C's literal rules (ll, ull, u); finite floats as C hex
    literals (-0 spelled out: 0x0.0p+0 has no sign), 16- and 8-bit floats as their IEEE /
    OCP fp8 bit patterns."""
    assert _base(casts, "sm_80").const_expr(x, e) == want


@pytest.mark.parametrize("x, e, bits", [
    (float("inf"), f32, "0x7f800000u"), (float("-inf"), f32, "0xff800000u"),
    (float("nan"), f32, "0x7fc00000u"), (float("inf"), opus.f64, "0x7ff0000000000000ull"),
    (float("-inf"), opus.f64, "0xfff0000000000000ull")])
def test_non_finite_constants_are_bit_patterns(x, e, bits):
    """C has no literal for inf or NaN: their IEEE 754 bit patterns, reinterpreted."""
    spec = casts.specialize(target="sm_80")
    em = CudaEmitter(spec.function, spec.target)   # the base emitter has no bitcasts
    want = em.bits_to_f32(bits) if e == f32 else em.bits_to_f64(bits)
    assert em.const_expr(x, e) == want and bits in want


def test_a_type_without_a_c_spelling_is_an_internal_error():
    with pytest.raises(CodegenError) as info:
        _base(casts, "sm_80").scalar_ctype(opus.tf32)
    assert info.value.raw_message == ("internal: tf32 reached the c renderer (the target's "
                                      "table refuses it while tracing)")


# -- scalar offsets: which are made uniform, and where they are added ----------------------------

@opus.kernel
def soffsets(x: opus.Ptr[f32], y: opus.Ptr[f32], s: i32, s64: opus.i64):
    t = opus.thread_id_x()
    y[t] = opus.load(x, t, soffset=s) + opus.load(x, t, soffset=s64)
    v = opus.load(x, t * 4, vec=4, soffset=s, offsets="u32")
    opus.store(y, v, t * 4, vec=4, soffset=s, offsets="u32")


def test_scalar_offsets_on_amd_are_read_from_the_first_lane_where_32_bit():
    """AMD: a 32-bit soffset is added through readfirstlane (kept in an SGPR), a 64-bit one as
    is (readfirstlane takes 32 bits); a "u32" access adds its soffset in its own 32-bit address
    (CEmitter._u32_address), not in a 64-bit element offset (no readfirstlane there: it made
    clang hoist 64-bit offsets in the GEMM's loop). CUDA: no readfirstlane at all."""
    lines = [l.strip() for l in _body_lines(soffsets.source(target="gfx942"))]
    offsets = [l for l in lines if l.startswith("long long eo")]
    assert len(offsets) == 2, offsets                     # the two accesses that are not "u32"
    assert "(long long)__builtin_amdgcn_readfirstlane((int)p_s_3)" in offsets[0]
    assert "(long long)p_s64_4" in offsets[1] and "readfirstlane" not in offsets[1]
    assert sum("readfirstlane" in l for l in lines) == 1
    assert sum("(unsigned)p_s_3" in l for l in lines) == 2   # each "u32" access: off + s
    assert "readfirstlane" not in soffsets.source(target="sm_90a")


# -- the kernel's frame: header line, dynamic shared memory, types without a C spelling ----------

def test_the_first_line_names_kernel_symbol_and_target():
    for target, backend in (("sm_80", CudaEmitter), ("gfx942", HipEmitter)):
        spec = casts.specialize(target=target)
        first = backend(spec.function, spec.target).render().splitlines()[0]
        assert first == (f"// opus kernel casts (symbol casts_opus) for {target} "
                         "(generated; no headers)")


@opus.kernel
def dyn_aligned(x: opus.Ptr[f32], WIDE: opus.constexpr):
    s = opus.dynamic_smem(f32, 0, align=WIDE)
    t = opus.thread_id_x()
    s.store(x[t], t)
    opus.sync_threads()
    x[t] = s.load(63 - t)


@pytest.mark.parametrize("align", [16, 128, 1024])
def test_dynamic_shared_memory_is_declared_with_the_alignment_asked_for(align):
    """dynamic_smem(align=) sets the region's base alignment (ir/ops.py: dyn_smem), spelled by
    each dialect: __align__(n) for CUDA, aligned(n) for HIP."""
    cuda = _body_lines(dyn_aligned.source(target="sm_80", WIDE=align))
    assert f"  extern __shared__ __align__({align}) unsigned char opus_dyn_smem[];" in cuda
    hip = _body_lines(dyn_aligned.source(target="gfx942", WIDE=align))
    assert (f"  extern __attribute__((shared)) __attribute__((aligned({align}))) unsigned char "
            "opus_dyn_smem[];") in hip


def test_a_value_type_without_a_c_type_is_an_internal_error():
    with pytest.raises(CodegenError) as info:
        _base(casts, "sm_80").ctype("f32x3")
    assert info.value.raw_message == "no C type for 'f32x3'"


def test_a_function_without_source_locations_renders_without_comments_or_markers():
    """IR whose ops carry no source location (made by hand, not traced): the kernel's lines
    have no Python-line comment and no #line marker, and nothing fails looking for one."""
    spec = casts.specialize(target="sm_80")
    fn = copy.deepcopy(spec.function)      # the kernel's own stays as traced
    for op in fn.walk():
        op.loc = None
    src = CudaEmitter(fn, spec.target).render()
    assert src[src.index("{\n") + 2:] == ("  int v3 = (int)threadIdx.x;\n  float v4 = p_x_1[v3];\n"
                                         "  int v5 = opus_cvt_s32_f32(v4);\n  p_y_2[v3] = v5;\n}\n")


@opus.kernel
def splat_first(y: opus.Ptr[f32], a: f32):
    v = opus.splat(a, 128) * 2.0      # lane-wise ops only, before any op that takes structs
    opus.store(y, v[0:4], opus.thread_id_x() * 4, vec=4)


def test_128_lane_vectors_are_split_from_the_first_op():
    """CUDA renders vectors of 128 lanes and more as one variable per lane (scalar_lanes_from),
    from the kernel's first op on: no struct type at all in a kernel of lane-wise ops."""
    src = splat_first.source(target="sm_80")
    assert "opus_f32x128" not in src
    lines = [l.strip() for l in _body_lines(src)]
    splat = next(l for l in lines if l.endswith("= p_a_2;"))
    assert splat.startswith("float v") and "_0 = " in splat


@opus.kernel
def packed_tile(x: opus.Ptr[opus.fp4_e2m1]):
    tile = opus.alloc_smem(opus.fp4_e2m1, 64)    # 64 codes: 32 bytes
    t = opus.thread_id_x() * 2
    tile.store(opus.load(x, t, vec=2), t, vec=2)
    opus.sync_threads()
    opus.store(x, tile.load(62 - t, vec=2), t, vec=2)


def test_packed_shared_arrays_are_declared_in_bytes():
    decl = [l.strip() for l in packed_tile.source(target="sm_90a").splitlines()
            if "__shared__" in l]
    assert len(decl) == 1 and decl[0].endswith(" unsigned char smem0[32];"), decl


# -- emit_op: its own refusals and the errors of a renderer --------------------------------------

def test_an_op_without_a_renderer_is_an_internal_error_at_its_line():
    spec = casts.specialize(target="sm_80")
    fn = copy.deepcopy(spec.function)
    op = next(op for op in fn.walk() if op.kind == "cast")
    op.kind = "no_such_op"
    with pytest.raises(CodegenError) as info:
        CudaEmitter(fn, spec.target).render()
    assert info.value.raw_message == ("internal: the cuda renderer has no rendering of op "
                                      "'no_such_op'")
    assert info.value.loc is op.loc


def test_an_exception_in_a_renderer_names_the_op_and_the_backend():
    spec = casts.specialize(target="sm_80")
    em = CudaEmitter(spec.function, spec.target)

    def broken(op, indent):
        raise ValueError("boom")
    em.renderers["cast"] = broken
    with pytest.raises(CodegenError) as info:
        em.render()
    assert info.value.raw_message == ("internal error rendering op 'cast' for cuda (sm_80): "
                                      "ValueError: boom")
    assert info.value.loc is not None and info.value.loc.line > 0


# -- the storage conversions' internal refusals (codegen/fp8.py) ----------------------------------

def test_storage_conversions_refuse_what_tracing_refuses_word_for_word():
    spec = casts.specialize(target="sm_90a")
    em = CudaEmitter(spec.function, spec.target)
    with pytest.raises(CodegenError) as info:
        em.encode_storage("f", opus.fp8_e4m3, "rz", False)
    assert info.value.raw_message == ("internal: rounding 'rz' to fp8_e4m3 reached the cuda "
                                      "renderer (tracing refuses it)")
    with pytest.raises(CodegenError) as info:
        em.encode_storage("f", opus.f16, "rn", False)
    assert info.value.raw_message == ("internal: conversion of f16 reached the cuda renderer for "
                                      "sm_90a (tracing refuses it)")
    with pytest.raises(CodegenError) as info:          # the target's table has no 'sr' here
        em.hw_sr("f", "r", opus.fp8_e4m3, False)
    assert info.value.raw_message == ("internal: the cuda renderer has no stochastic-rounding "
                                      "instruction for fp8_e4m3 on sm_90a")


def test_hip_unbounded_cache_hint_other_than_streaming_is_refused_word_for_word():
    """Only STREAMING has a builtin for unbounded HIP accesses (nontemporal); the target table
    gives no other hint there, so another reaching the renderer is an internal error."""
    spec = casts.specialize(target="gfx942")
    em = HipEmitter(spec.function, spec.target)
    with pytest.raises(CodegenError) as info:
        em.load_expr("p", "float", 4, "glc")
    assert info.value.raw_message == ("internal: cache policy glc on an unbounded access reached "
                                      "the hip renderer (only STREAMING's nt has a builtin there)")


# -- s_waitcnt's immediate (gfx9: vmcnt bits 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8) ----------

def _waits(vmcnt=None, lgkmcnt=None, expcnt=None):
    @opus.kernel
    def wait(y: opus.Ptr[f32]):
        opus.s_waitcnt(vmcnt=vmcnt, lgkmcnt=lgkmcnt, expcnt=expcnt)
        y[opus.thread_id_x()] = 1.0
    return wait


@pytest.mark.parametrize("counts,imm,reading", [
    # a counter left alone is at its maximum: vmcnt 63, expcnt 7, lgkmcnt 15
    (dict(lgkmcnt=0), 0xC07F, "s_waitcnt lgkmcnt(0)"),
    (dict(vmcnt=0), 0x0F70, "s_waitcnt vmcnt(0)"),
    # vmcnt 20 = 0b01_0100: 4 in bits 3:0, 1 in bits 15:14; expcnt 2 in bits 6:4
    (dict(vmcnt=20, expcnt=2), 0x4F24, "s_waitcnt vmcnt(20) expcnt(2)"),
    (dict(vmcnt=63, lgkmcnt=3), 0xC37F, "s_waitcnt lgkmcnt(3)"),
])
def test_amd_waitcnt_immediate_by_hand_and_as_the_assembler_reads_it(counts, imm, reading):
    k = _waits(**counts)
    assert f"__builtin_amdgcn_s_waitcnt({hex(imm)});" in k.source(target="gfx942")
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import assemble_amd, hip_compiler
    try:
        hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))
    asm = assemble_amd(k.source(target="gfx942"), k.specialize(target="gfx942").target)
    waits = [l.strip() for l in asm.splitlines() if l.strip().startswith("s_waitcnt")]
    assert reading in waits, waits


@opus.kernel
def fp4_param(q: opus.Ptr[opus.fp4_e2m1], y: opus.Ptr[f32], n: i32):
    y[opus.thread_id_x()] = opus.f32(n)


@opus.kernel
def bool_param(b: opus.Ptr[opus.bool_], y: opus.Ptr[f32], n: i32):
    y[opus.thread_id_x()] = opus.f32(n)


@pytest.mark.parametrize("kind,what", [("load", "loads"), ("store", "stores")])
def test_hip_bounded_sub_byte_access_is_refused_word_for_word(kind, what):
    """Sub-byte (packed) accesses go to codegen/subbyte.py before the buffer path, and bounded
    ones are refused while tracing: one reaching the buffer path's parts anyway is an internal
    error naming the access and the type (bool, a byte in memory, is not sub-byte there)."""
    spec = fp4_param.specialize(target="gfx942")
    em = HipEmitter(spec.function, spec.target)
    em.render()                                   # the parameters get their C names
    q, _, n = (p.value for p in spec.function.params)
    op = type("Op", (), {"kind": kind, "attrs": {},
                         "operands": [q, n, n] if kind == "load" else [q, n, n, n]})()
    with pytest.raises(CodegenError) as info:
        em._bounded(op, 1)
    assert info.value.raw_message == (f"internal: bounded {what} of fp4_e2m1 reached the hip "
                                      "renderer (sub-byte types are refused while tracing)")
    spec = bool_param.specialize(target="gfx942")     # bool: one byte, no refusal
    em = HipEmitter(spec.function, spec.target)
    em.render()
    b, _, n = (p.value for p in spec.function.params)
    operands = [b, n, n] if kind == "load" else [b, n, n, n]
    assert em._bounded(type("Op", (), {"kind": kind, "attrs": {}, "operands": operands})(),
                       1).s == 1
