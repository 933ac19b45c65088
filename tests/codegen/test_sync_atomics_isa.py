"""Atomics and synchronization compile to the instructions the target table names: SASS from
NVRTC (ATOMG, REDG where the old value is unused, ATOMS, BAR.SYNC/BAR.ARV with ids, MEMBAR,
CS2R clock reads) and AMDGCN from clang (global_atomic_*, buffer_atomic_* through bounded
views, ds_* on LDS, s_setprio, s_nop, s_sleep, s_memtime, sched_barrier markers); a type a
chip lacks is refused while tracing, naming the chip."""
import re
import sys
import os

import pytest

import opus
from opus import f16, bf16, f32, f64, i32, u32, u64
from opus.targets import get_target
from opus.targets.sync_atomics import atomic_rows

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "amd"))
from test_amd_target import asm_of, instrs  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPUS_CACHE_DIR", str(tmp_path_factory.mktemp("opus-sync-atomics-cache")))
    yield
    mp.undo()


def sass_lines(kernel, arch, **cx):
    return [l.split("*/", 1)[-1].strip() for l in kernel.specialize(target=arch, **cx).sass.splitlines()
            if "/*" in l]


@opus.kernel
def global_atomics(f: opus.Ptr[f32], d: opus.Ptr[f64], u: opus.Ptr[u32], q: opus.Ptr[u64],
                   h: opus.Ptr[f16], o: opus.Ptr[f32]):
    i = opus.thread_id_x()
    opus.atomic_add(f, 1.0, i)                       # no use of the old value: RED
    o[i] = opus.atomic_add(f, 2.0, i + 64, order="acq_rel")  # ATOM
    opus.atomic_add(d, 1.0, i)
    opus.atomic_max(u, opus.cast(i, u32), i, scope="block")
    opus.atomic_min(q, opus.u64(7), i)
    opus.atomic_add(h, opus.make_vector(f16(1.0), f16(2.0)), 2 * i)
    o[i + 128] = opus.f32(opus.atomic_cas(u, 1, 2, i + 64) + opus.atomic_inc(u, 9, i + 128))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_global_atomics_sass(arch):
    s = "\n".join(sass_lines(global_atomics, arch))
    assert re.search(r"REDG?\.E\.ADD\.F32\.FTZ\.RN", s)  # red: the result is unused
    assert re.search(r"ATOMG\.E\.ADD\.F32\.FTZ\.RN", s)
    assert re.search(r"REDG?\.E\.ADD\.F64", s)
    assert re.search(r"ATOMG?\.E\.MAX\.STRONG\.SM|REDG?\.E\.MAX\.STRONG\.SM", s)  # scope cta
    assert re.search(r"(ATOMG|REDG?)\.E\.MIN\.64", s)
    assert re.search(r"REDG?\.E\.ADD\.F16x2", s)
    assert "ATOMG.E.CAS" in s and re.search(r"ATOMG\.E\.INC", s)
    assert "MEMBAR" in s  # acq_rel around the returning add


@opus.kernel
def sync_kernel(o: opus.Ptr[u64], f: opus.Ptr[f32]):
    t = opus.thread_id_x()
    s = opus.alloc_smem(f32, 64)
    s[t % 64] = 0.0
    opus.sync_threads()
    opus.atomic_add(s, 1.0, t % 4, scope="block")
    if t < 64:
        opus.barrier_arrive(1, 128)
    else:
        opus.barrier_sync(1, 128)
    opus.sync_warp()
    opus.fence("block")
    opus.fence("system", order="seq_cst")
    c = opus.clock64()
    o[t] = c + opus.u64(opus.clock()) + opus.globaltimer()
    f[t] = s[t % 64]


def test_sync_sass():
    s = "\n".join(sass_lines(sync_kernel, "sm_90a"))
    assert re.search(r"BAR\.SYNC(\.DEFER_BLOCKING)? 0x1, 0x80", s)
    assert re.search(r"BAR\.ARV 0x1, 0x80", s)
    assert "MEMBAR.ALL.CTA" in s or "MEMBAR.SC.CTA" in s
    assert "MEMBAR.SC.SYS" in s
    assert "ATOMS" in s  # the shared-memory f32 add (a CAS loop on ATOMS)
    assert "CS2R" in s and "SR_CLOCKLO" in s and "SR_GLOBALTIMERLO" in s


@opus.kernel
def amd_kernel(f: opus.Ptr[f32], d: opus.Ptr[f64], u: opus.Ptr[u32], h: opus.Ptr[bf16],
               o: opus.Ptr[u64], n: i32):
    t = opus.thread_id_x()
    g = opus.make_gmem(f, n)
    g.atomic_add(1.0, t)                               # buffer_atomic_add_f32
    opus.make_gmem(u, n).atomic_max(opus.cast(t, u32), t)  # buffer_atomic_umax
    opus.atomic_add(f, 2.0, t + 64)                    # global_atomic_add_f32
    opus.atomic_max(d, 1.0, t)                         # global_atomic_max_f64
    opus.atomic_add(h, opus.make_vector(bf16(1.0), bf16(2.0)), 2 * t)  # global pk_add_bf16
    s = opus.alloc_smem(f32, 64)
    s[t % 64] = 0.0
    opus.sync_threads()
    opus.atomic_add(s, 1.0, t % 4, scope="block")      # ds_add_f32
    opus.atomic_max(s, 3.0, t % 8, scope="block")      # ds_max_f32
    opus.s_setprio(2)
    opus.s_nop(3)
    opus.s_sleep(1)
    opus.sched_barrier(0)
    opus.sched_group_barrier(0x8, 2, 0)
    opus.s_waitcnt(vmcnt=0, lgkmcnt=0, expcnt=0)
    o[t] = opus.s_memtime() + opus.s_memrealtime()
    f[t + 128] = s[t % 64]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amd_atomics_and_hints(arch):
    asm = asm_of(amd_kernel, arch)
    ins = instrs(asm)
    text = "\n".join(ins)
    for want in ("buffer_atomic_add_f32", "buffer_atomic_umax", "global_atomic_add_f32",
                 "global_atomic_max_f64", "global_atomic_pk_add_bf16", "ds_add_f32",
                 "ds_max_f32", "s_setprio 2", "s_nop 3", "s_sleep 1", "s_memtime",
                 "s_memrealtime", "s_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0)"):
        assert want in text, want
    assert "sched_barrier mask(0x00000000)" in asm
    assert "sched_group_barrier mask(0x00000008) size(2) SyncID(0)" in asm
    assert "global_atomic_cmpswap" not in text  # every atomic is one instruction, no CAS loop


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("key", ["f32", "f64", "u32", "i32", "u64", "i64", "f16x2", "bf16x2"])
def test_every_amd_add_row_is_its_instruction(arch, key):
    """Each add row of the table compiles to the instruction it names (global and LDS)."""
    elem = {"f16x2": f16, "bf16x2": bf16}.get(key) or getattr(opus, key)
    for space in ("global", "shared"):
        want = atomic_rows(get_target(arch))[("add", key, space)]

        @opus.kernel
        def k(p: opus.Ptr[elem], SPACE: opus.constexpr):
            t = opus.thread_id_x()
            v = opus.make_vector(elem(1.0), elem(1.0)) if key.endswith("x2") else elem(1)
            if SPACE == "shared":
                s = opus.alloc_smem(elem, 256)
                s[t] = elem(0)
                opus.sync_threads()
                opus.atomic_add(s, v, 2 * (t % 4), scope="block")
                opus.sync_threads()
                p[t] = s[t]
            else:
                opus.atomic_add(p, v, 2 * t)
        text = "\n".join(instrs(asm_of(k, arch, SPACE=space)))
        assert want in text, (space, want)
        assert "cmpswap" not in text and "ds_cmpst" not in text


def test_bf16x2_buffer_add_is_gfx950_only():
    @opus.kernel
    def k(h: opus.Ptr[bf16], n: i32):
        opus.make_gmem(h, n).atomic_add(opus.make_vector(bf16(1.0), bf16(1.0)),
                                        2 * opus.thread_id_x())
    assert "buffer_atomic_pk_add_bf16" in "\n".join(instrs(asm_of(k, "gfx950")))
    # gfx942 has no buffer pk_add_bf16: the bounded view takes the predicated global atomic
    assert "global_atomic_pk_add_bf16" in "\n".join(instrs(asm_of(k, "gfx942")))
