"""Async copies compiled for real: NVRTC's SASS has LDGSTS (with ZFILL where a bound gives the
src-size, BYPASS for .cg), LDGDEPBAR for the commit and DEPBAR.LE SB0 for the wait; clang's
AMDGCN has buffer_load_{ubyte,ushort,dword,dwordx3,dwordx4} ... lds with M0 set, and
s_waitcnt vmcnt(n) where wait_async counts the groups' copies."""
import re

import pytest

import opus
from opus import f16, f32, i32, u8
from opus.targets import get_target


def _tile(dtype, vec, cache="ca", bounded=True):
    @opus.kernel
    def copy_tile(x: opus.Ptr[dtype], out: opus.Ptr[dtype], n: i32):
        t = opus.thread_id_x()
        tile = opus.alloc_smem(dtype, 64 * vec)
        g = opus.make_gmem(x, n) if bounded else opus.make_gmem(x)
        opus.copy_async(tile, vec * t, g, vec * t, vec=vec, cache=cache)
        opus.commit_async()
        opus.copy_async(tile, vec * t, g, vec * t + 64 * vec, vec=vec, cache=cache)
        opus.commit_async()
        opus.wait_async(1)
        opus.sync_threads()
        opus.make_gmem(out).store(tile.load(vec * (63 - t), vec=vec), vec * t)
    return copy_tile


def _sass(kernel, arch):
    return kernel.specialize(target=arch).sass


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype,vec,width", [(f32, 1, ""), (f32, 2, ".64"), (f32, 4, ".128"),
                                             (u8, 16, ".128"), (f16, 2, "")])
def test_cp_async_is_ldgsts_with_depbar(arch, dtype, vec, width):
    sass = _sass(_tile(dtype, vec), arch)
    copies = [l for l in sass.splitlines() if "LDGSTS" in l]
    assert len(copies) == 2, sass
    # the bound's src-size: ZFILL (partial sizes) or a zero-fill predicate operand (0 or all)
    pattern = rf"LDGSTS\.E{re.escape(width)}(\.ZFILL)? \[R\d+(\+0x\w+)?\], (desc\[UR\d+\])?\[R\d+\.64(\+0x\w+)?\], P\d"
    assert all(re.search(pattern, l) for l in copies), copies
    assert sass.count("LDGDEPBAR") == 2
    assert re.search(r"DEPBAR\.LE SB0, 0x1", sass)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cg_bypasses_l1_and_unbounded_has_no_zfill(arch):
    sass = _sass(_tile(f32, 4, cache="cg", bounded=False), arch)
    copies = [l for l in sass.splitlines() if "LDGSTS" in l]
    assert len(copies) == 2 and all("BYPASS.128" in l and "ZFILL" not in l for l in copies)
    src = _tile(f32, 4, cache="cg", bounded=False).source(target=arch)
    assert "cp.async.cg.shared.global [%0], [%1], 16;" in src


def _asm(kernel, arch, **cx):
    from opus.runtime.amd_build import hip_compiler, assemble_amd
    from opus.errors import OpusRuntimeError
    try:
        hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))
    return assemble_amd(kernel.source(target=arch, **cx), get_target(arch))


def _lds(dtype, vec):
    @opus.kernel
    def lds_copy(x: opus.Ptr[dtype], out: opus.Ptr[dtype], n: i32):
        t = opus.thread_id_x()
        tile = opus.alloc_smem(dtype, 4096 // dtype.itemsize)
        g = opus.make_gmem(x, n)
        opus.copy_async_lds(tile, 0, g, vec * t, vec=vec)
        opus.commit_async()
        opus.copy_async_lds(tile, 1024 // dtype.itemsize, g, vec * t + 64 * vec, vec=vec)
        opus.commit_async()
        opus.wait_async(1)
        opus.sync_threads()
        out[t] = tile[t]
    return lds_copy


LDS = [("gfx942", u8, 1, "buffer_load_ubyte"), ("gfx942", f16, 1, "buffer_load_ushort"),
       ("gfx942", f32, 1, "buffer_load_dword"), ("gfx950", f16, 2, "buffer_load_dword"),
       ("gfx950", f32, 3, "buffer_load_dwordx3"), ("gfx950", f32, 4, "buffer_load_dwordx4")]


@pytest.mark.parametrize("arch,dtype,vec,mnemonic", LDS, ids=lambda v: getattr(v, "name", str(v)))
def test_lds_copy_is_buffer_load_lds_with_vmcnt(arch, dtype, vec, mnemonic):
    asm = _asm(_lds(dtype, vec), arch)
    ins = [l.strip() for l in asm.splitlines() if l.startswith("\t")]
    copies = [l for l in ins if re.match(rf"{mnemonic}\s.*\blds$", l)]
    assert len(copies) == 2, [l for l in ins if "lds" in l]
    assert any(l.startswith("s_mov_b32 m0") or " m0," in l for l in ins)
    assert any(re.match(r"s_waitcnt vmcnt\(1\)", l) for l in ins), [l for l in ins if "waitcnt" in l]


def test_s_waitcnt_immediates():
    @opus.kernel
    def waits(x: opus.Ptr[f32]):
        tile = opus.alloc_smem(f32, 64)
        opus.copy_async_lds(tile, 0, x, opus.thread_id_x())
        opus.s_waitcnt(vmcnt=40, lgkmcnt=3)
        opus.s_waitcnt(lgkmcnt=0)
        opus.sync_threads()
        x[opus.thread_id_x()] = tile[opus.thread_id_x()]
    ins = [l.strip() for l in _asm(waits, "gfx942").splitlines() if l.startswith("\t")]
    assert "s_waitcnt vmcnt(40) lgkmcnt(3)" in ins


def test_lds_copy_records_come_from_the_bound():
    """buffer_load ... lds through a bounded view: the buffer resource's num_records is the
    bound's (opus_nrec of n); through an unbounded view it spans 0xfffffff0 bytes."""
    def rsrc_lines(bounded):
        @opus.kernel
        def lds_copy(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32):
            t = opus.thread_id_x()
            tile = opus.alloc_smem(f32, 256)
            g = opus.make_gmem(x, n) if bounded else opus.make_gmem(x)
            opus.copy_async_lds(tile, 0, g, t)
            opus.commit_async()
            opus.wait_async(0)
            opus.sync_threads()
            out[t] = tile[t]
        src = lds_copy.source(target="gfx942")
        return [l.strip() for l in src.splitlines() if "make_buffer_rsrc" in l]
    bounded, unbounded = rsrc_lines(True), rsrc_lines(False)
    assert len(bounded) == 1 and re.search(r"opus_nrec\(\(long long\)\w*n\w*, 4u\)", bounded[0]), bounded
    assert len(unbounded) == 1 and "opus_nrec((long long)4294967280ll, 4u)" in unbounded[0], unbounded
