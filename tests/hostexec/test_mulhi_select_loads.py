"""Paths of codegen/cemit.py that the differential programs do not generate, run on the host
in both dialects against hand values and numpy: mulhi's 64-bit products (signed and unsigned),
a select whose condition is one scalar for a vector (ir/ops.py allows it; the language
broadcasts it first), register vectors of 2 and 4 lanes written lane by lane, a bounded vector
load whose 64-bit scalar offset puts it past 2^32 elements, a bounded load of 4-bit codes whose
bound splits a byte, and the refusal of a binary op the renderer lacks (issue 17.4: these kill
the surviving mutants of CEmitter._bcast, binary_expr's mulhi and render_load).

Some run under UBSan (OPUS_HOSTEXEC_UBSAN=1: the host program stops at undefined behaviour):
a lane written past a vector's last one, or a product that overflows a signed 64-bit type, is
undefined behaviour that an optimizing compiler may turn into any result, so the emitted C
must have none."""
import functools
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import opus
from opus import f32, i32, i64, u32
from opus.codegen.cemit import CodegenError
from hostexec import HostProgram, Launch, host_cxx, run_kernel
from hostexec.runner import UBSAN

TARGETS = ["sm_80", "gfx942"]


@functools.cache
def _ubsan_builds():
    """Whether the host compiler builds and runs a program with UBSan's flags."""
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "probe.cpp", Path(d) / "probe"
        src.write_text("int main(int argc, char**) { return argc - 1; }\n")
        built = subprocess.run(host_cxx() + UBSAN + ["-o", str(exe), str(src)], capture_output=True)
        return built.returncode == 0 and subprocess.run([str(exe)]).returncode == 0


@pytest.fixture
def ubsan(monkeypatch):
    """The host program built with UBSan (stops at the first undefined behaviour)."""
    if not _ubsan_builds():
        pytest.skip("the host C++ compiler cannot build with -fsanitize=undefined")
    monkeypatch.setenv("OPUS_HOSTEXEC_UBSAN", "1")


# -- mulhi: the high word of the exact product ----------------------------------------------------

@functools.cache
def mulhi_of(T):
    @opus.kernel
    def mulhi_k(x: opus.Ptr[T], y: opus.Ptr[T], o: opus.Ptr[T]):
        t = opus.thread_id_x()
        o[t] = opus.mulhi(x[t], y[t])
    return mulhi_k


I32_PAIRS = [(-1, -1), (-1, 1), (-3, 5), (-2 ** 31, -2 ** 31), (2 ** 31 - 1, 2 ** 31 - 1),
             (-2 ** 31, 2 ** 31 - 1), (123456789, -987654321), (65536, 65536)]
U32_PAIRS = [(2 ** 32 - 1, 2 ** 32 - 1), (2 ** 31, 2), (2 ** 32 - 1, 1), (2 ** 31, 2 ** 31),
             (3_000_000_000, 4_000_000_000), (123456789, 987654321), (65536, 65536), (0, 7)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("T,pairs", [(i32, I32_PAIRS), (u32, U32_PAIRS)], ids=["i32", "u32"])
def test_mulhi_is_the_high_word_of_the_exact_product(target, T, pairs, ubsan, tmp_path):
    """(a * b) >> 32 in Python integers (floor for negative products: -1 for -15); the u32
    products past 2^63 would overflow a signed 64-bit multiply (undefined: UBSan stops it)."""
    np_t = np.int32 if T is i32 else np.uint32
    x = np.array([a for a, _ in pairs], np_t)
    y = np.array([b for _, b in pairs], np_t)
    o = np.zeros(len(pairs), np_t)
    run_kernel(mulhi_of(T), 1, len(pairs), x, y, o, target=target, workdir=tmp_path)
    np.testing.assert_array_equal(o, np.array([(a * b) >> 32 for a, b in pairs], np_t))


# -- register vectors of 2 and 4 lanes, lane by lane -----------------------------------------------

@opus.kernel
def two_and_four_lanes(x: opus.Ptr[i32], y: opus.Ptr[f32], o: opus.Ptr[i32], p: opus.Ptr[f32]):
    t = opus.thread_id_x()
    a2, b2 = opus.load(x, t * 8, vec=2), opus.load(x, t * 8 + 2, vec=2)
    a4 = opus.load(x, t * 8 + 4, vec=4)
    opus.store(o, a2 - b2, t * 8, vec=2)
    opus.store(o, opus.select(a2 < b2, a2, b2), t * 8 + 2, vec=2)
    opus.store(o, opus.med3(a4, 0, 100) * 3, t * 8 + 4, vec=4)
    f4 = opus.load(y, t * 4, vec=4)
    opus.store(p, opus.fma(f4, f4, 0.5), t * 4, vec=4)


@pytest.mark.parametrize("target", TARGETS)
def test_two_and_four_lane_vectors_write_their_own_lanes_only(target, ubsan, tmp_path):
    """Binary ops, select, med3 and fma on 2- and 4-lane vectors: each of their lanes written
    once, none past the last (UBSan: an index past a vector struct's array stops the run)."""
    x = (np.arange(16, dtype=np.int32) * 37 % 251 - 100).astype(np.int32)
    y = np.arange(8, dtype=np.float32) * 0.25 - 1
    o = np.zeros(16, np.int32)
    p = np.zeros(8, np.float32)
    run_kernel(two_and_four_lanes, 1, 2, x, y, o, p, target=target, workdir=tmp_path)
    want = np.zeros(16, np.int32)
    for t in range(2):
        a2, b2, a4 = x[t * 8:t * 8 + 2], x[t * 8 + 2:t * 8 + 4], x[t * 8 + 4:t * 8 + 8]
        want[t * 8:t * 8 + 2] = a2 - b2
        want[t * 8 + 2:t * 8 + 4] = np.minimum(a2, b2)
        want[t * 8 + 4:t * 8 + 8] = np.clip(a4, 0, 100) * 3
    np.testing.assert_array_equal(o, want)
    np.testing.assert_array_equal(p, y * y + np.float32(0.5))      # exact: quarters squared


# -- a select with one scalar condition for a vector (ir/ops.py select) ----------------------------

def _scalar_condition_select(kernel, target):
    """``kernel`` specialized for ``target`` with its select's condition the scalar bool the
    language broadcast (ir/ops.py: cond is a bool or a bool vector of matching lanes)."""
    spec = kernel.specialize(target=target)
    [sel] = [op for op in spec.function.walk() if op.kind == "select"]
    cond = sel.operands[0]
    if cond.owner.kind == "broadcast":    # (a second call gets the spec already changed)
        sel.operands[0] = cond.owner.operands[0]
    assert sel.operands[0].type == opus.bool_ and sel.results[0].type.n == 4
    return spec


@opus.kernel
def pick_whole_vectors(x: opus.Ptr[i32], o: opus.Ptr[i32]):
    t = opus.thread_id_x()
    v = opus.select(t % 2 == 0, opus.load(x, 0, vec=4), opus.load(x, 4, vec=4))
    opus.store(o, v, t * 4, vec=4)


@pytest.mark.parametrize("target", TARGETS)
def test_a_scalar_condition_picks_whole_vectors(target, tmp_path):
    """Lanes 0 and 2 take x[0:4], lanes 1 and 3 x[4:8], every one of the four elements."""
    prog = HostProgram(target)
    k = prog.add(_scalar_condition_select(pick_whole_vectors, target))
    prog.build(tmp_path)
    x = np.array([11, -22, 33, -44, 55, -66, 77, -88], np.int32)
    o = np.zeros(16, np.int32)
    prog.run([Launch(k, 1, 4, [x, o])])
    np.testing.assert_array_equal(o, np.concatenate([x[:4], x[4:], x[:4], x[4:]]))


# -- a bounded vector load with a 64-bit scalar offset ----------------------------------------------

@opus.kernel
def shifted_soffset_load(x: opus.Ptr[i32], o: opus.Ptr[i32], back: i64, soff: i64, n: i32):
    t = opus.thread_id_x()
    v = opus.load(x - back, t * 4, vec=4, bound=n, soffset=soff)   # (x - back)[4t + soff ..]
    opus.store(o, v, t * 4, vec=4)


@pytest.mark.parametrize("target", TARGETS)
def test_bounded_load_past_2_to_the_32_elements_reads_zeros(target, tmp_path):
    """ir/ops.py: element off+soffset+i of a bounded load is read only if it is below the
    bound. With the pointer 2^32 elements before x and soffset 2^32, elements 4t + 2^32 lie
    far past the bound 8 and read 0, although their address is x's own 4t (an offset taken
    modulo 2^32 would find 4t <= 8 - 4 and load x). The same kernel without the shift reads
    x from soffset 4 on, per element where the vector crosses the bound 10."""
    prog = HostProgram(target)
    k = prog.add(shifted_soffset_load.specialize(target=target))
    prog.build(tmp_path)
    x1 = np.arange(1, 17, dtype=np.int32) * 7
    x2 = x1.copy()
    far, near = np.full(8, -1, np.int32), np.full(8, -1, np.int32)
    prog.run([Launch(k, 1, 2, [x1, far, 2 ** 32, 2 ** 32, 8]),
              Launch(k, 1, 2, [x2, near, 0, 4, 10])])
    np.testing.assert_array_equal(far, np.zeros(8, np.int32))
    np.testing.assert_array_equal(near, np.concatenate([x2[4:10], [0, 0]]))


# -- a bounded load of 4-bit elements ----------------------------------------------------------------

@opus.kernel
def uint4_bounded_copy(q: opus.Ptr[opus.uint4], o: opus.Ptr[opus.uint4], n: i32):
    t = opus.thread_id_x()
    opus.store(o, opus.load(q, t * 8, vec=8, bound=n), t * 8, vec=8)   # 8 codes: 4 bytes


@pytest.mark.parametrize("target", TARGETS)
def test_bounded_uint4_load_reads_zero_codes_from_the_bound_on(target, tmp_path):
    """ir/ops.py sub-byte types: element i in bits [4i, 4i + 4) of the byte stream; with the
    bound 13 (inside thread 1's vector and inside byte 6), codes 13 and up read 0, code 12
    (the same byte's low half) is kept."""
    codes = (np.arange(24) * 7 + 3) % 16
    q = np.frombuffer(sum(int(c) << (4 * i) for i, c in enumerate(codes)).to_bytes(12, "little"),
                      np.uint8).copy()
    o = np.full(12, 0xEE, np.uint8)
    run_kernel(uint4_bounded_copy, 1, 3, q, o, 13, target=target, workdir=tmp_path)
    stream = int.from_bytes(o.tobytes(), "little")
    got = [(stream >> (4 * i)) & 15 for i in range(24)]
    assert got == [int(c) for c in codes[:13]] + [0] * 11


# -- a binary op the renderer lacks -----------------------------------------------------------------

@opus.kernel
def int_and(x: opus.Ptr[i32]):
    x[0] = x[0] & x[1]


@pytest.mark.parametrize("target", TARGETS)
def test_binary_op_the_renderer_lacks_is_refused_by_name(target):
    """An integer binary op outside ir/ops.py's list (tracing never makes one) is refused
    naming the op and the type, at the kernel's line."""
    spec = int_and.specialize(target=target)
    [op] = [op for op in spec.function.walk() if op.kind == "binary"]
    op.attrs = {**op.attrs, "op": "pow"}
    with pytest.raises(CodegenError) as info:
        spec.source
    assert info.value.raw_message == "binary pow on i32"
    assert "test_mulhi_select_loads.py:" in str(info.value)
