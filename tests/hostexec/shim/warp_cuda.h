// CUDA warp intrinsics of codegen/cuda.py's readfirstlane (CEmitter._lane_read: a shuffle of
// each 32-bit word from the lowest lane of __activemask()), on the rendezvous of host.h. An
// extension header (README.md, "Cross-lane builtins"): a kernel that calls them runs as fibers.
#pragma once

// __activemask(): the lanes of the warp executing the call; on the host every lane of the warp
// that has not returned reaches it (a rendezvous cannot be reached by some lanes only)
static inline unsigned opus_host_activemask() { return (unsigned)opus_host_warp_live_mask(); }

// a shuffle's member mask: on the host only the warp's live lanes (a partial mask is not shimmed)
static inline void opus_host_members(unsigned m, const char* what) {
  if (m != opus_host_activemask()) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: the member mask %#x is not the warp's live lanes (not shimmed)",
             what, m);
    opus_host_fail(msg);
  }
}

// __shfl_sync(mask, var, srcLane) (width 32): lane srcLane % 32's var, every lane of mask
// taking part (CUDA Programming Guide, "Warp Shuffle Functions")
static inline unsigned opus_host_shfl_sync(unsigned mask, unsigned var, int src) {
  opus_host_members(mask, "__shfl_sync");
  return opus_host_read_lane(var, (unsigned)src % 32u);
}

#define __activemask() opus_host_activemask()
#define __ffs(x) __builtin_ffs((int)(x))
#define __shfl_sync(mask, var, src) opus_host_shfl_sync(mask, var, src)

// PTX cross-lane instructions of codegen/cuda.py's helpers (the inline asm the runner rewrites
// into opus_ptx:: calls), each from the PTX ISA's definition, on the same rendezvous
namespace opus_ptx {

// activemask.b32 d: the lanes executing it (every live lane: see opus_host_activemask)
static inline void activemask_b32(unsigned& d) { d = opus_host_activemask(); }

// shfl.sync.<mode>.b32 d, a, b, c, membermask (PTX ISA, "shfl.sync", Semantics):
//   lane = laneid, bval = b[4:0], cval = c[4:0], segmask = c[12:8]
//   maxLane = (lane & segmask) | (cval & ~segmask), minLane = lane & segmask
//   up: j = lane - bval, pval = j >= maxLane;   down: j = lane + bval, pval = j <= maxLane
//   bfly: j = lane ^ bval, pval = j <= maxLane; idx: j = minLane | (bval & ~segmask), pval = j <= maxLane
//   if (!pval) j = lane; d = a of lane j
enum opus_host_shfl_mode { SHFL_UP, SHFL_DOWN, SHFL_BFLY, SHFL_IDX };
static inline void opus_host_shfl(unsigned& d, unsigned a, int b, int c, unsigned m,
                                  opus_host_shfl_mode mode) {
  opus_host_members(m, "shfl.sync");
  int lane = (int)opus_host_lane(), bval = b & 31, cval = c & 31, seg = (c >> 8) & 31;
  int maxLane = (lane & seg) | (cval & ~seg), minLane = lane & seg, j = lane;
  bool pval = false;
  switch (mode) {
    case SHFL_UP: j = lane - bval; pval = j >= maxLane; break;
    case SHFL_DOWN: j = lane + bval; pval = j <= maxLane; break;
    case SHFL_BFLY: j = lane ^ bval; pval = j <= maxLane; break;
    case SHFL_IDX: j = minLane | (bval & ~seg); pval = j <= maxLane; break;
  }
  if (!pval) j = lane;
  d = opus_host_read_lane(a, (unsigned)j);
}
static inline void shfl_sync_up_b32(unsigned& d, unsigned a, int b, int c, unsigned m) { opus_host_shfl(d, a, b, c, m, SHFL_UP); }
static inline void shfl_sync_down_b32(unsigned& d, unsigned a, int b, int c, unsigned m) { opus_host_shfl(d, a, b, c, m, SHFL_DOWN); }
static inline void shfl_sync_bfly_b32(unsigned& d, unsigned a, int b, int c, unsigned m) { opus_host_shfl(d, a, b, c, m, SHFL_BFLY); }
static inline void shfl_sync_idx_b32(unsigned& d, unsigned a, int b, int c, unsigned m) { opus_host_shfl(d, a, b, c, m, SHFL_IDX); }

// redux.sync.<op>.<type> d, a, membermask (PTX ISA, "redux.sync"): the reduction of a over the
// member lanes; .add wraps to 32 bits, .min/.max compare as .s32 or .u32, .and/.or/.xor on .b32
template <typename T, typename F>
static inline void opus_host_redux(T& d, T a, unsigned m, F f) {
  opus_host_members(m, "redux.sync");
  unsigned lane = opus_host_lane();
  memcpy(opus_host_xchg(lane), &a, sizeof a);
  opus_host_warp_rendezvous();
  bool first = true;
  T r = a;
  for (unsigned l = 0; l < OPUS_HOST_WARP; l++) {
    if (!(m >> l & 1u)) continue;
    T v;
    memcpy(&v, opus_host_xchg(l), sizeof v);
    r = first ? v : f(r, v);
    first = false;
  }
  opus_host_warp_rendezvous();
  d = r;
}
static inline void redux_sync_add_s32(int& d, int a, unsigned m) { opus_host_redux(d, a, m, [](int x, int y) { return (int)((unsigned)x + (unsigned)y); }); }
static inline void redux_sync_add_u32(unsigned& d, unsigned a, unsigned m) { opus_host_redux(d, a, m, [](unsigned x, unsigned y) { return x + y; }); }
static inline void redux_sync_min_s32(int& d, int a, unsigned m) { opus_host_redux(d, a, m, [](int x, int y) { return x < y ? x : y; }); }
static inline void redux_sync_min_u32(unsigned& d, unsigned a, unsigned m) { opus_host_redux(d, a, m, [](unsigned x, unsigned y) { return x < y ? x : y; }); }
static inline void redux_sync_max_s32(int& d, int a, unsigned m) { opus_host_redux(d, a, m, [](int x, int y) { return x > y ? x : y; }); }
static inline void redux_sync_max_u32(unsigned& d, unsigned a, unsigned m) { opus_host_redux(d, a, m, [](unsigned x, unsigned y) { return x > y ? x : y; }); }
template <typename T> static inline void redux_sync_and_b32(T& d, T a, unsigned m) { opus_host_redux(d, a, m, [](T x, T y) { return (T)(x & y); }); }
template <typename T> static inline void redux_sync_or_b32(T& d, T a, unsigned m) { opus_host_redux(d, a, m, [](T x, T y) { return (T)(x | y); }); }
template <typename T> static inline void redux_sync_xor_b32(T& d, T a, unsigned m) { opus_host_redux(d, a, m, [](T x, T y) { return (T)(x ^ y); }); }

}  // namespace opus_ptx
