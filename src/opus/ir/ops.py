"""The op catalogue: every op kind, what it takes and what it means.

Semantics here are normative: the renderers and the interpreter implement exactly this.

Arithmetic (operands and result share one scalar or vector type unless said otherwise)
  const      attrs value (Python int/float/bool, or a tuple for vectors)   -> 1 result
  binary     a, b; attrs op:
               add sub mul          integers wrap at their width; floats round to nearest even
                                    (f16/bf16: computed in f32, rounded once to the type); a mul
                                    feeding an add rounds twice: backends must not contract
                                    them into an fma (only the fma op fuses)
               div                  floats only (true division)
               floordiv mod         integers, Python semantics (floor; mod takes the divisor's
                                    sign); division by zero: quotient -1 (all ones), mod = a
               tdiv tmod            integers, C semantics (truncate toward zero); by zero as above
               and or xor           integers and bool
               shl shr              integers; shr is arithmetic for signed, logical for unsigned;
                                    the amount b is read as unsigned and amounts >= width give 0
                                    (shl, logical shr) or the sign fill (arithmetic shr)
               min max              floats: IEEE 754-2019 minimumNumber/maximumNumber: a NaN
                                    operand (quiet or signaling) yields the other, two NaNs a
                                    NaN, -0 < +0. attrs nan='ieee2008' (the AMD one-instruction
                                    form, opus.max(..., nan="fast") there): the same except
                                    that a signaling NaN operand yields a quiet NaN (IEEE
                                    754-2008 minNum/maxNum: v_min/v_max_f* in IEEE mode)
               mulhi                32-bit integers: the high 32 bits of the exact 64-bit
                                    product (signed for i32, unsigned for u32)
  cmp        a, b; attrs pred in lt le gt ge eq ne           -> bool (vector of bool for vectors)
               floats: ordered compares, ne is unordered (NaN != x is true)
  unary      a; attrs op in neg, invert (bitwise), not (bool), abs
  math       a; attrs fn in exp exp2 log log2 sqrt rsqrt sin cos tanh floor ceil trunc rint
               (floats only; f16/bf16 computed in f32 and rounded; accuracy: within a few ulp
               of the correctly rounded result, except floor/ceil/trunc/rint/sqrt: exact)
  fma        a, b, c  -> a*b+c with one rounding in f32/f64 (f16/bf16: f32 fma, then rounded)
  select     cond (bool, or bool vector of matching lanes), a, b
  med3       a, b, c  -> the median of the three. Integers: exact. Floats (f16/bf16 computed in
               f32): with no NaN operand the median, -0 < +0; with a NaN operand (quiet or
               signaling) the minimum of the operands that are not NaN (-0 < +0; NaN only
               when all three are). This is AMD's v_med3_f32 (CDNA3 ISA: a NaN operand gives
               min3 of the operands, whose IEEE-mode min skips quiet NaNs; the lowering
               quiets signaling NaNs first); NVIDIA composes min/max and tests for NaN.
  cast       a [, rbits]; attrs to (DType), rounding, sat (bool)
               int->int: wraps (keeps the low bits, sign- or zero-extends)
               float->int: toward zero, saturating to the range, NaN -> 0
               int->float, float->float: rounded per attrs rounding:
                 'rn'  nearest even (every destination; the default)
                 'rz'  toward zero (into f16, bf16 and e8m0 only)
                 'truncate'  (bf16 only) the high 16 bits of the f32 bits, NaNs included (a
                       NaN whose payload lies in the low 16 bits becomes an infinity)
                 'truncate_with_nan'  (bf16 only) the high 16 bits, then bit 0 set when the
                       exponent is all ones and the low 16 bits are not zero (every NaN stays
                       a NaN, sign and signalling bit kept; the original's bf16 modes 2 and 1)
                 'sr'  stochastic: operand rbits (u32, one per lane) holds the random bits.
                       Into f16, bf16 and the fp8 types, from f32, f16 or bf16 (exact in f32).
                       For finite non-zero x with the destination's m mantissa bits and
                       smallest normal exponent emin: e = max(exponent of |x|, emin),
                       S = floor(|x| * 2^(23-e)) (a 24-bit integer; below the destination's
                       normal range the bits under 2^(emin-23) are dropped first),
                       R = rbits >> (9+m) (the top 23-m bits of the random word, added just
                       below the kept mantissa), |result| = floor((S + R) / 2^(23-m)) * 2^(e-m),
                       sign kept; then encoded as 'rn' encodes that (exact) value, so a result
                       past the largest finite one follows sat and the format's overflow rule.
                       Zero, infinities and NaN convert as with 'rn'. The rule is the one of
                       AMD's gfx950 stochastic conversions (v_cvt_sr_*: the random word's top
                       bits added below the kept mantissa, then truncation; AMD's host model in
                       HIP's amd_hip_ocp_host.hpp, from_float_sr)
               gfx950 pairs f32 <-> fp4 lanes through v_cvt_scalef32_pk_fp4_f32 /
               _pk_f32_fp4 at scale 1.0 with the same results (docs/language.md, "Hardware
               conversions on gfx950", gives the instructions' semantics and sources)
               fp8/fp4 destinations saturate when sat=True (+-largest finite value, infinities
               too), else follow the format's overflow rule (e5m2: inf; e4m3: NaN keeping the
               sign; FNUZ: their NaN 0x80; e2m1: +-6)
               bool->x: 0/1; x->bool: x != 0
  bitcast    a; attrs to (type of the same total bit width; packed vectors: their bytes)

Sub-byte types (fp4_e2m1, fp6_e2m3, fp6_e3m2, int4, uint4: DType.packed)
  A scalar is one byte holding the element's code in its low bits (the other bits 0). Vectors
  and memory pack them without gaps: element i occupies bits [i*b, (i+1)*b) of the
  little-endian byte stream (b the type's bits; element 0 in the low bits of byte 0, as the
  original packs fp4; fp6 fields may cross bytes and 32-bit words, which is the layout of
  gfx950's packed fp6 operands: 32 fp6 in 6 dwords). A vector holds a multiple of
  DType.pack_elems elements (whole bytes: 2 for 4-bit, 4 for fp6). bitcast between a packed
  vector and integers reads those bytes. Memory (load, store, ptr_add, views): offsets and
  bounds count elements; an access moves whole bytes, so vec is a multiple of pack_elems and
  the element offset (from the pointer's own element 0) too, and a pointer moves by multiples
  of pack_elems; an access's address is aligned to the largest power of two dividing its
  byte count (<= 16). A compile-time offset that breaks this is a trace error; a run-time one
  is checked by the interpreter (a fault naming the rule) and unchecked on the GPU. With a
  bound, the elements at or past it are neither read (0) nor written even where they share a
  byte with an element before it (a store at an odd bound rewrites that byte's in-range bits
  only, a read-modify-write: no other thread may write the byte's other elements at once).
  Conversions: int4/uint4 are integers (casts wrap into them, floats truncate and saturate);
  fp4/fp6 have no inf or NaN: a value past the largest finite one (infinities too) gives it
  with its sign, as e2m1's rule above; NaN gives a zero of the opposite sign (ml_dtypes'
  rule: +NaN -> -0).

Vectors
  vector     n scalars of one type -> vector of n lanes
  extract    v; attrs index (static)                   -> scalar
  insert     v, s; attrs index                         -> vector
  broadcast  s; attrs n                                -> vector of n copies
  vector_permute  v; attrs indices (static tuple)      -> vector of v's lanes in that order (slices;
               indices may repeat or leave lanes out). One thread's registers only: not a
               warp shuffle, which moves values between threads

Memory (offsets count elements, not bytes)
  ptr_add    p, off                                    -> pointer
  load       p, off [, bound] [, soffset]; attrs vec [, cache, soffset]  -> scalar (vec 1) or vector
  store      p, off, value [, bound] [, soffset]; attrs vec [, cache, soffset]  -> none
               With a bound operand (an i32/i64 element count, counted from p itself, so
               a shifted pointer's bound starts at its own address), each element at index
               off+i is accessed only if 0 <= off+i < bound: loads read 0 for the others,
               stores drop them. Without it the access is unchecked (caller's promise).
               A vec > 1 access needs its address aligned to vec*itemsize bytes (sub-byte
               types: see "Sub-byte types" above).
               The bound is exact per element on every target. AMD lowers it to the buffer
               unit's range check (CDNA3 ISA, "Buffer range checking": a raw buffer, stride
               0; offsets are unsigned; an access of at most 4 bytes is in range when all its
               bytes lie below num_records, a wider one is checked per dword, each dword
               dropped or kept whole), which is exact per element for elements of >= 4 bytes
               and, for narrower ones, where no dword holds elements on both sides of the
               bound (bound a multiple of the elements per dword, the pointer aligned to the
               access); elsewhere the lowering adds a per-element path.
               attrs soffset (True): the last operand is a scalar offset (elements, any
               integer type) that must be the same for every active lane of a warp (AMD: the
               buffer instruction's SGPR offset, read with readfirstlane; a lane that differs
               is an error in the interpreter). The access is at element off+soffset+i
               (exact, no wrap); with a bound, each element is accessed only if off >= 0,
               soffset >= 0 and off+soffset+i < bound (the buffer unit's unsigned offsets).
               attrs u32 (True; unbounded accesses only): the caller's promise that the
               access's element offset off (+ soffset) is in [0, L) with L = 2^35 // bits of
               the element (2^32 / itemsize: its byte offset fits 32 unsigned bits). One
               outside [0, L) is an error in the interpreter (MemoryFault, on every access);
               the renderers form the address as the base plus (off + soffset) * itemsize in
               32-bit unsigned arithmetic (AMD: the global instructions' SGPR base + 32-bit
               VGPR offset where the base is wave-uniform).
               attrs cache: a cache hint (an opus.Cache name other than 'normal'; the
               target's table spells it, tracing refuses one it lacks). It changes how the
               access uses the caches, never its result.
  smem_alloc attrs dtype, count, align, name           -> pointer<shared>; kernel-scoped storage
  dyn_smem   attrs dtype, offset (bytes), align       -> pointer<shared> into dynamic shared memory
               (the function's attrs dyn_smem_align: the region's base alignment in bytes, the
               largest align any dyn_smem asked for; the view is at base + offset)

Async barriers and the tensor memory accelerator (NVIDIA sm_90+: tracing refuses them elsewhere)
  An mbarrier is 8 bytes of shared memory (8-byte aligned) named by a ptr<u64, shared>. Its
  state (PTX ISA, "mbarrier"): the current phase (counting from 0; its parity is phase & 1), the
  expected and the pending arrival counts, and a signed transaction count tx (bytes). The current
  phase completes when pending arrivals and tx are both 0: the phase counts up, pending resets
  to the expected count. Each thread executing an op below does it once (its own operands).
  mbarrier_init      bar, count (i32, 1 <= count < 2**20)   phase 0, pending = expected = count,
                     tx = 0 (any earlier state of the barrier is dropped)
  mbarrier_arrive    bar [, bytes]; attrs expect_tx (bool)  with expect_tx, tx += bytes first
                     (mbarrier.arrive.expect_tx); then one arrival: pending -= 1. Arrivals of
                     the threads of one op apply one after another (a phase may complete in
                     between); an arrival with none pending is an error (undefined in PTX)
  mbarrier_expect_tx bar, bytes (i32, 0 <= bytes < 2**20)   tx += bytes, no arrival
  mbarrier_try_wait  bar, parity (i32)                      -> bool: the phase of that parity
                     has completed, i.e. the current phase's parity differs from parity & 1 (so
                     on a fresh barrier a wait for parity 1 succeeds at once: the phase before
                     phase 0 counts as complete). Not blocking
  mbarrier_wait      bar, parity                            returns once try_wait would be true.
                     One that can never complete (the wrong parity, arrivals or bytes that never
                     come) hangs the GPU; the interpreter reports it as an error at its line
  fence              attrs kind: 'proxy_async' (fence.proxy.async.shared::cta: the executing
                     thread's generic shared-memory writes before it are visible to TMA reads
                     (tma_store) issued after it) or 'mbarrier_init' (fence.mbarrier_init
                     .release.cluster: this thread's mbarrier_inits are visible to the async
                     proxy, i.e. TMA completions, before a barrier makes them visible to others)
  tma_load           tmap, dst (ptr<T, shared>, 128-byte aligned), bar, *coords (i32, one per
                     dimension of the map, outermost first as in the tensor's shape)
                     copies the map's box at coords into dst: box elements outside the tensor
                     (on either side) read 0; packed row-major (innermost dimension contiguous),
                     each 16-byte chunk at its shared address with the map's swizzle applied
                     (32/64/128-byte modes: address bits 4.. XORed with bits 7.., the pattern of
                     swizzle_bytes; as the hardware, on absolute shared addresses). Asynchronous:
                     when the copy lands its bytes count against bar's tx (complete_tx); a thread
                     may read dst only after its wait on that phase of bar (reading earlier is a
                     race: the interpreter's checking mode reports it)
  tma_store          tmap, src (ptr<T, shared>, 128-byte aligned), *coords
                     the reverse: the box read from src (same placement) is written to the
                     tensor at coords; elements outside the tensor are not written. Asynchronous:
                     it joins the thread's open bulk group; src must not be written before a
                     bulk_wait_group read covering it, and src's generic writes need a fence
                     'proxy_async' between them and the store
  bulk_commit_group  closes the executing thread's open bulk group (its uncommitted tma_stores)
  bulk_wait_group    attrs n (static int >= 0), read (bool): returns once at most n of the
                     thread's committed groups are pending; with read, pending means their
                     sources are not read yet (src may be reused after), else that their writes
                     are not complete (visible in global memory after)

Asynchronous copies, global -> shared (per thread; src and dst share one element type)
  cp_async   dst, dst_off, src, src_off [, bound]; attrs nbytes (4, 8, 16), cache ('ca' | 'cg')
               NVIDIA cp.async: nbytes bytes from src[src_off..] (global) to dst[dst_off..]
               (shared), both addresses aligned to nbytes. The source is read at issue. With
               bound (elements counted from src, as for load) only the leading in-range
               elements are copied and the rest of the nbytes are zero-filled (PTX src-size):
               k = 0 if src_off < 0 else clamp(bound - src_off, 0, n) elements of n.
  lds_load   dst, wave_off, src, src_off [, bound]; attrs nbytes (1, 2, 4; 12, 16 on gfx950)
               AMD buffer_load ... lds: the destination is not per thread. wave_off must be the
               same in every active lane of a wave (it becomes M0); lane l of the wave writes
               its nbytes at byte (dst + wave_off elements) + l * slot, slot = 4 bytes for
               nbytes <= 4, else 16; the slot's other bytes get unspecified values. The
               source is a buffer resource from src: src_off < 0 reads zeros; with bound, a
               dword of the access (the whole access when nbytes < 4) not wholly inside
               [0, bound * itemsize) bytes reads zeros. Inactive lanes write nothing.
             Both join the thread's open group and are pending: their destination bytes are
             written when an async_wait covering them completes, not at a barrier (reads before
             that give the old bytes: the hardware may or may not have landed the copy).
  async_commit  closes the thread's open group (cp.async.commit_group; nothing on AMD)
  async_wait    attrs groups, vmcnt, lgkmcnt (each an int or None)
               groups = n: completes the thread's copies in all but its newest n committed
               groups (uncommitted copies stay pending); else vmcnt = n: all but the thread's
               newest n copies (s_waitcnt vmcnt). lgkmcnt waits for LDS/scalar-memory counters
               (complete at once in the interpreter). Rendered: cp.async.wait_group n, or
               s_waitcnt with vmcnt (the language computes it from groups on AMD), lgkmcnt.
               Optional attrs expcnt (AMD export counter, 0..7; nothing to wait for in the
               interpreter).

Atomics (ir kind atomic; availability per (op, type, space): targets/sync_atomics.py)
  atomic     p, off [, value] [, compare] [, bound]; attrs op, order, scope, vec, bounded
               -> the old value (none for op 'store')
               op: add min max exch cas and or xor inc dec load store, on the element at p+off
               (vec 2: a packed f16x2/bf16x2 pair at p+off, p+off+1, 4-byte aligned, each
               half added on its own). value is absent for load; compare (cas only) comes
               before value in the language and after it here: cas writes value where the
               old element equals compare (bitwise for floats). inc: old >= value ? 0 : old+1,
               dec: (old == 0 or old > value) ? value : old-1 (u32, CUDA atomicInc/Dec).
               min/max: integers by their signedness; floats IEEE minNum/maxNum as binary.
               Integer adds wrap. Float adds round to nearest even; on NVIDIA an f32 add on
               global memory flushes subnormal inputs and results to signed zero (PTX atom;
               sync_atomics.f32_add_flushes), the packed halves never do (.noftz).
               order (relaxed acquire release acq_rel) and scope (block device system) as in
               the PTX/C++ memory models; they change which other memory accesses are
               ordered with the atomic, never its own result. A load takes relaxed or
               acquire, a store relaxed or release.
               Every active lane performs its atomic once. Lanes whose elements conflict (the
               same address) apply in ascending batch-lane order, i.e. by linear block index,
               then linear thread index: the interpreter's order. On the GPU the order is
               unspecified, so only order-independent results are portable: integer add, min,
               max, and, or, xor totals; float min/max; float add totals only up to rounding
               (each lane's returned old value depends on the order everywhere).
               With bounded (the last operand is the bound, counted from p as for load), a
               lane whose element (pair) is not wholly inside [0, bound) does nothing and
               returns 0 (AMD: buffer_atomic_*, the buffer unit's range check). Without it an
               out-of-range lane is a fault, and a misaligned pair is a fault (as for load).
               Shared-memory atomics do not race with each other; in checking mode they read
               as loads do (a plain write by another thread with no barrier in between is
               reported, as is a read of never-written shared memory).
  spin_wait  p, off, value; attrs cmp ('eq': wait while the element != value; 'lt': wait
               while element < value, i.e. until it reaches value, as the original's
               workgroup_barrier), scope
               each active thread reads p[off] with relaxed atomic loads until the condition
               lets it go, then acquires at scope. Interpreter: blocks run one after another,
               so nothing can change memory while a block waits: a condition that does not
               hold when the op runs is an error there (never a hang).

Synchronization
  sync_warp  mask (u32 NVIDIA, u64 AMD: one bit per lane)   the lanes in mask wait for each
               other (bar.warp.sync) and their memory accesses before it are visible to each
               other after it. The calling lane must be in mask, and every lane in mask that
               has not exited must execute it with it (else an error: the GPU deadlocks or is
               undefined). AMD: a wave runs in lockstep, so it is a wave barrier (no
               instruction) with a workgroup-scope fence's ordering for the compiler.
  named_barrier  id [, count]; attrs arrive (bool), counted (bool)
               NVIDIA bar.sync / bar.arrive id, count: barrier id (0..15) completes when count
               threads (a multiple of the warp size; default: the whole block) have arrived,
               counting whole warps. arrive=True arrives without waiting (producers); sync
               arrives and waits. Interpreter: arrivals accumulate per id; a sync must find
               its barrier complete with its own arrivals (the interpreter runs divergent
               branches one after another, so the arriving threads must come first in program
               order), else an error, as is an id with incomplete arrivals at the block's end.
  memory_fence  attrs scope (block device system), order (acq_rel seq_cst)
               orders the thread's memory accesses before it with those after it as seen by
               threads in scope (NVIDIA fence.{acq_rel,sc}.{cta,gpu,sys}; AMD
               __builtin_amdgcn_fence at workgroup, agent or system scope). No effect in the
               interpreter, whose memory is sequentially consistent.
  sched_hint attrs name (s_setprio s_nop s_sleep sched_barrier sched_group_barrier), args
               (static ints)   AMD scheduling, priority and timing hints: no effect on values
               (nothing in the interpreter).
  clock      attrs which (clock clock64 globaltimer s_memtime s_memrealtime)  -> u32 or u64
               a counter read. Interpreter: a per-launch counter that counts clock ops executed
               (non-decreasing per thread; not a time).

Threads
  special    attrs which in thread_id.{x,y,z} block_id.{x,y,z} block_dim.{x,y,z}
               num_blocks.{x,y,z} (blocks in the grid) grid_size.{x,y,z} (threads in the
               grid: num_blocks * block_dim, wrapping at 32 bits) lane_id warp_id    -> i32
  barrier    (block-wide: every thread of the block waits; shared-memory writes before it are
              visible to reads after it)
  readfirstlane  a (scalar)  -> a as held by the first (lowest) active lane of the executing
              thread's warp, in every active lane (AMD v_readfirstlane_b32 per 32 bits, an
              SGPR; NVIDIA a shuffle from the lowest lane of __activemask())
  uniform    a (scalar)  -> a, which the kernel promises is the same on every active lane of
              the warp (so AMD may keep it in an SGPR: it is rendered as readfirstlane;
              NVIDIA: a itself). A lane that differs breaks the promise: the result is then
              the first active lane's on AMD and each lane's own on NVIDIA; the interpreter
              returns each lane's own and its checking mode reports the first lane that
              differs, naming the line
  target_op  operands; attrs name (key in the Target's instruction table), plus its own attrs;
             results as the table entry declares. Lowering, lane layout and emulation live
             with the table entry (targets/).
             Warp accesses (targets/warp_access.py: ldmatrix, stmatrix, ds_read_tr) take
             p (shared pointer), off [, value]: address lanes 0 .. rows-1 of each warp each
             read or write vec elements at p+off as one aligned vector access (as load/store:
             unchecked bounds, vec*itemsize alignment); other lanes' p+off are not used. A load
             returns the register vector element i of lane l = element e of lane s's row,
             (s, e) = the row's source(l, i); a store writes the inverse. Whole warps only.
             wgmma rows (targets/nv_wgmma.py, sm_90a) are issued by whole warpgroups of 128
             threads: mma_async takes A (shared pointer + element offset, or registers), B
             (pointer + offset), C, scale-d, with the descriptors' static bits in attrs, and
             returns D and an i32 token; fence returns its operands, commit closes a group,
             wait n returns its accumulator operands once their wgmmas completed (the
             interpreter's model: interp/wgmma.py).
  printf     operands; attrs fmt (printf-style, one conversion per operand)

Cross-lane operations (lang/warp.py). A warp is warp_size consecutive threads of a block by
linear thread index (the last one partial where the block is not a multiple: its missing lanes
count as exited). Operands and results here are 32-bit scalars (i32, u32, f32; the language
moves other types through them); a lane mask is u32 on 32-lane warps and u64 on 64-lane ones.
The optional trailing mask operand (attrs mask True) names the member lanes: every executing
lane must be in it and every lane of it that has not exited must execute the op (NVIDIA's
membermask; a lane missing hangs the GPU: the interpreter reports it; AMD renders no mask).
Without it the members are the lanes active at the op (NVIDIA activemask, AMD's EXEC).
Reading a lane that is not a member is unspecified (NVIDIA: undefined; AMD ds_bpermute: 0):
the interpreter gives 0 and its checking mode reports it, naming the line and both lanes.
  shuffle    x, src (i32) [, mask]; attrs mode, width (power of two <= warp size), mask,
             lowering -> x's type. Lanes form groups of width lanes (base b = lane & ~(width-1));
             d = src mod warp size. The lane read, j:
               idx   b + (src mod width)
               up    lane - d, or lane itself when that is < b
               down  lane + d, or lane itself when that is > b + width - 1
               xor   lane ^ d, or lane itself when that is > b + width - 1 (so a mask >= width
                     reads an earlier group, never a later one: CUDA's __shfl_xor_sync rule)
             (PTX shfl.sync with c = ((32 - width) << 8) | clamp). attrs lowering: None (NVIDIA
             shfl.sync; AMD ds_bpermute_b32), ('dpp', ctrl, old_is_x) on AMD where one DPP move
             gives the same lanes (the language picks it for compile-time src), 'readlane'
             (AMD v_readlane_b32: idx with a compile-time src, width = warp size). A lowering
             never changes the result a member lane reads from a member lane.
  dpp        old, x; attrs ctrl, row_mask, bank_mask, bound_ctrl, strict -> x's type (AMD GFX9
             DPP16, CDNA3 ISA "DPP"; __builtin_amdgcn_update_dpp). Rows are 16 lanes, banks
             the 4 groups of 4 lanes of a row (bank (lane % 16) // 4). ctrl names the source
             lane s of each lane r (row position p = r % 16, row base R = r - p):
               0x000-0x0ff quad_perm  s = r - r % 4 + ((ctrl >> 2 * (r % 4)) & 3)
               0x101-0x10f row_shl n  s = r + n, invalid when p + n > 15
               0x111-0x11f row_shr n  s = r - n, invalid when p < n
               0x121-0x12f row_ror n  s = R + (p - n) mod 16
               0x130 wave_shl1 s = r + 1 (invalid at the last lane); 0x138 wave_shr1 s = r - 1
               (invalid at lane 0); 0x134 wave_rol1 s = (r + 1) mod ws; 0x13c wave_ror1
               s = (r - 1) mod ws
               0x140 row_mirror s = R + 15 - p; 0x141 row_half_mirror s = r - p % 8 + 7 - p % 8
               0x142 row_bcast15 s = R - 1 (lane 15 of the row before; invalid in row 0)
               0x143 row_bcast31 s = 31 in rows 2 and 3 (invalid in rows 0 and 1)
             A lane whose row bit of row_mask or bank bit of bank_mask is 0 is not written: it
             gives old. Otherwise, when s is invalid or an inactive lane: bound_ctrl True gives
             0, False leaves the lane unwritten (old); else x of lane s. strict (the
             language's own uses): a read of an inactive lane s is also reported by the
             interpreter's checking mode (the portable operation built on it leaves it
             unspecified). NVIDIA has no DPP (a trace error).
  vote       pred (bool) [, mask]; attrs mode, mask -> ballot: the lane mask of the member lanes
             whose pred is true (u32/u64); any: whether some member's pred is true; all: whether
             every member's is (bool). NVIDIA vote.sync; AMD s_ballot (v_cmp to an SGPR pair)
  permute    x, addr (i32) -> x's type (AMD ds_permute_b32, a forward permute): each active
             lane l sends x to lane (addr >> 2) mod ws (addr a byte address); a lane several
             send to gets the highest sending lane's value, a lane none sends to gets 0. AMD
             only (NVIDIA shuffles pull: a trace error there)
  warp_redux x (i32/u32) [, mask]; attrs op (add min max and or xor), mask -> the op over the
             member lanes' x, in every member (add wraps). NVIDIA redux.sync (sm_80+); the
             language uses it for whole-warp 32-bit integer reductions. Checking mode also
             reports a lane of the warp that has not exited and is not a member (warp_reduce
             asks for whole groups)

Control flow (structured)
  for        lb, ub, step, *inits; region body(iv, *carried) ending in yield; attrs unroll
               -> results: the carried values after the last iteration. Iterates while iv < ub
               (step > 0) or iv > ub (step < 0); step 0 is an error checked at run time as a trap.
  if         cond, *; regions then, else (each ending in yield)  -> results
  while      *inits; regions cond(*carried) ending in condition(c),
               body(*carried) ending in yield(*carried)          -> results (the carried values
               when c was false)
  yield      *values   (terminates for-body, if-branches, while-body)
  condition  c          (terminates a while's cond region)
  return     (ends the thread's kernel execution)
"""
from __future__ import annotations

__all__ = ["OPS", "BINARY_OPS", "CMP_PREDS", "UNARY_OPS", "MATH_FNS", "SPECIALS", "OpSpec",
           "op_handlers", "access_operands", "atomic_operands"]


class OpSpec:
    """Shape of an op kind: operand count (None = variadic), region count, required attrs."""

    __slots__ = ("kind", "operands", "regions", "attrs", "terminator")

    def __init__(self, kind, operands, regions=0, attrs=(), terminator=False):
        self.kind, self.operands, self.regions = kind, operands, regions
        self.attrs, self.terminator = tuple(attrs), terminator


BINARY_OPS = frozenset("add sub mul div floordiv mod tdiv tmod and or xor shl shr min max mulhi"
                       .split())
CMP_PREDS = frozenset("lt le gt ge eq ne".split())
UNARY_OPS = frozenset("neg invert not abs popc".split())
MATH_FNS = frozenset("exp exp2 log log2 sqrt rsqrt sin cos tanh floor ceil trunc rint".split())
SPECIALS = frozenset(
    [f"{k}.{a}" for k in ("thread_id", "block_id", "block_dim", "num_blocks", "grid_size")
     for a in "xyz"]
    + ["lane_id", "warp_id"])

OPS = {s.kind: s for s in [
    OpSpec("const", 0, attrs=("value",)),
    OpSpec("binary", 2, attrs=("op",)),
    OpSpec("cmp", 2, attrs=("pred",)),
    OpSpec("unary", 1, attrs=("op",)),
    OpSpec("math", 1, attrs=("fn",)),
    OpSpec("fma", 3),
    OpSpec("select", 3),
    OpSpec("med3", 3),
    OpSpec("cast", None, attrs=("to", "rounding", "sat")),
    OpSpec("bitcast", 1, attrs=("to",)),
    OpSpec("vector", None),
    OpSpec("extract", 1, attrs=("index",)),
    OpSpec("insert", 2, attrs=("index",)),
    OpSpec("broadcast", 1, attrs=("n",)),
    OpSpec("vector_permute", 1, attrs=("indices",)),
    OpSpec("ptr_add", 2),
    OpSpec("load", None, attrs=("vec",)),
    OpSpec("store", None, attrs=("vec",)),
    OpSpec("smem_alloc", 0, attrs=("dtype", "count", "align", "name")),
    OpSpec("dyn_smem", 0, attrs=("dtype", "offset", "align")),
    OpSpec("mbarrier_init", 2),
    OpSpec("mbarrier_arrive", None, attrs=("expect_tx",)),
    OpSpec("mbarrier_expect_tx", 2),
    OpSpec("mbarrier_try_wait", 2),
    OpSpec("mbarrier_wait", 2),
    OpSpec("fence", 0, attrs=("kind",)),
    OpSpec("tma_load", None),
    OpSpec("tma_store", None),
    OpSpec("bulk_commit_group", 0),
    OpSpec("bulk_wait_group", 0, attrs=("n", "read")),
    OpSpec("cp_async", None, attrs=("nbytes", "cache")),
    OpSpec("lds_load", None, attrs=("nbytes",)),
    OpSpec("async_commit", 0),
    OpSpec("async_wait", 0, attrs=("groups", "vmcnt", "lgkmcnt")),
    OpSpec("atomic", None, attrs=("op", "order", "scope", "vec", "bounded")),
    OpSpec("spin_wait", 3, attrs=("cmp", "scope")),
    OpSpec("sync_warp", 1),
    OpSpec("named_barrier", None, attrs=("arrive", "counted")),
    OpSpec("memory_fence", 0, attrs=("scope", "order")),
    OpSpec("sched_hint", 0, attrs=("name", "args")),
    OpSpec("clock", 0, attrs=("which",)),
    OpSpec("special", 0, attrs=("which",)),
    OpSpec("barrier", 0),
    OpSpec("readfirstlane", 1),
    OpSpec("uniform", 1),
    OpSpec("shuffle", None, attrs=("mode", "width", "mask", "lowering")),
    OpSpec("dpp", 2, attrs=("ctrl", "row_mask", "bank_mask", "bound_ctrl", "strict")),
    OpSpec("vote", None, attrs=("mode", "mask")),
    OpSpec("permute", 2),
    OpSpec("warp_redux", None, attrs=("op", "mask")),
    OpSpec("target_op", None, attrs=("name",)),
    OpSpec("printf", None, attrs=("fmt",)),
    OpSpec("for", None, regions=1, attrs=("unroll",)),
    OpSpec("if", 1, regions=2),
    OpSpec("while", None, regions=2),
    OpSpec("yield", None, terminator=True),
    OpSpec("condition", 1, terminator=True),
    OpSpec("return", 0, terminator=True),
]}


def access_operands(op):
    """(pointer, offset, value or None, bound or None, soffset or None) of a load or store,
    whose operands are p, off [, value] [, bound] [, soffset] (soffset iff attrs['soffset'])."""
    ops = list(op.operands)
    soffset = ops.pop() if op.attrs.get("soffset") else None
    value = ops.pop(2) if op.kind == "store" else None
    return ops[0], ops[1], value, (ops[2] if len(ops) > 2 else None), soffset


def atomic_operands(op):
    """(pointer, offset, value or None, compare or None, bound or None) of an atomic, whose
    operands are p, off [, value] [, compare] [, bound]."""
    ops = list(op.operands)
    bound = ops.pop() if op.attrs["bounded"] else None
    compare = ops.pop() if op.attrs["op"] == "cas" else None
    value = ops[2] if len(ops) > 2 else None
    return ops[0], ops[1], value, compare, bound


def op_handlers(backend, prefix: str) -> dict:
    """A backend's per-op dispatch table: {op kind: its bound method ``<prefix><kind>``} for each
    kind of ``OPS`` it defines (codegen: ``render_<kind>``, the interpreter: ``exec_<kind>``).
    Built per instance, so a method replaced on the class (a test's monkeypatch) is used."""
    return {kind: getattr(backend, prefix + kind) for kind in OPS if hasattr(backend, prefix + kind)}
