"""Rendered CUDA C++ and real NVRTC compiles (no GPU needed): SASS has the instructions we mean."""
import pytest

import opus
from opus import examples as ex
from opus.runtime import build as rbuild

ARCHS = ["sm_80", "sm_90a"]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("k", [ex.vector_add, ex.vector_add_f16, ex.vector_add_bf16])
def test_vector_add_uses_16_byte_accesses(arch, k):
    s = k.specialize(target=arch)
    assert "#include" not in s.source
    sass = s.sass
    assert "LDG.E.128" in sass and "STG.E.128" in sass
    assert s.resources["spill_stores"] == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_mma_smoke_compiles_to_hmma(arch):
    s = ex.mma_gemm_16x8.specialize(target=arch)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in s.source
    assert "HMMA.16816.F32.BF16" in s.sass


def test_block_reduce_has_barrier_and_shared_memory():
    s = ex.block_reduce.specialize(target="sm_90a")
    assert "__launch_bounds__(256)" in s.source
    assert "BAR.SYNC" in s.sass
    assert s.resources["shared_bytes"] == 1024


def test_ptx_is_available():
    assert ".version" in ex.vector_add.ptx(target="sm_90a")


def test_every_op_kind_renders_and_compiles():
    @opus.kernel
    def kitchen(x: opus.Ptr[opus.f32], h: opus.Ptr[opus.bf16], o: opus.Ptr[opus.i32], n: opus.i32):
        i = opus.thread_id_x()
        a = x[i]
        b = opus.f32(h[i])
        q = n // 3 + n % 5 + opus.tdiv(n, -7) + opus.tmod(n, 7) + (n << 3) + (n >> i)
        q = q ^ (n & 0xFF) | opus.max(n, i) - opus.min(n, 4) + abs(n)
        c = opus.fma(a, b, 1.0) + opus.exp2(a) + opus.rsqrt(b) + opus.floor(a) + opus.max(a, b)
        v = opus.make_vector(a, b, c, a)
        v = opus.insert(v, 1, 3.0)
        w = v[1:3]
        z = opus.select(a > b, w[0], w[1])
        h[i] = opus.cast(z, opus.bf16, rounding="rz")
        o[i] = q + opus.i32(c) + opus.bitcast(a, opus.i32)
        s = opus.alloc_smem(opus.f32, 64)
        s[i] = c
        opus.sync_threads()
        acc = opus.f16(0.0)
        k = 0
        while k < n:
            acc = acc + opus.f16(s[k % 64])
            k = k + 1
        x[i] = opus.f32(acc) + opus.f32(opus.lane_id() + opus.warp_id())
        opus.printf("%d %f\n", i, a)

    s = kitchen.specialize(target="sm_90a")
    assert s.compiled.binary[:4] == b"\x7fELF"


def test_compile_error_shows_source(monkeypatch):
    from opus.runtime import nvrtc
    with pytest.raises(opus.CompileError, match="not_a_type"):
        nvrtc.compile_cuda('extern "C" __global__ void k() { not_a_type x; }', arch="sm_90a")


def test_disk_cache_hit_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path))
    from opus.runtime import cache as c
    monkeypatch.setattr(c, "_default", None, raising=False)
    src = ex.vector_add.source(target="sm_90a") + "// cache test\n"
    tgt = opus.targets.get_target("sm_90a")
    first = rbuild.build(src, tgt)
    assert not first.cached
    again = rbuild.build(src, tgt)
    assert again.cached and again.binary == first.binary
    for f in tmp_path.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            f.write_bytes(data[: len(data) // 2])  # truncate every entry
    rebuilt = rbuild.build(src, tgt)
    assert not rebuilt.cached and rebuilt.binary == first.binary
