// CUDA warp intrinsics of codegen/cuda.py's readfirstlane (CEmitter._lane_read: a shuffle of
// each 32-bit word from the lowest lane of __activemask()), on the rendezvous of host.h. An
// extension header (README.md, "Cross-lane builtins"): a kernel that calls them runs as fibers.
#pragma once

// __activemask(): the lanes of the warp executing the call; on the host every lane of the warp
// that has not returned reaches it (a rendezvous cannot be reached by some lanes only)
static inline unsigned opus_host_activemask() { return (unsigned)opus_host_warp_live_mask(); }

// __shfl_sync(mask, var, srcLane) (width 32): lane srcLane % 32's var, every lane of mask
// taking part (CUDA Programming Guide, "Warp Shuffle Functions")
static inline unsigned opus_host_shfl_sync(unsigned mask, unsigned var, int src) {
  if (mask != opus_host_activemask())
    opus_host_fail("__shfl_sync: the mask is not the warp's live lanes (not shimmed)");
  memcpy(opus_host_xchg(opus_host_lane()), &var, sizeof var);
  opus_host_warp_rendezvous();
  unsigned r;
  memcpy(&r, opus_host_xchg((unsigned)src % 32u), sizeof r);
  opus_host_warp_rendezvous();
  return r;
}

#define __activemask() opus_host_activemask()
#define __ffs(x) __builtin_ffs((int)(x))
#define __shfl_sync(mask, var, src) opus_host_shfl_sync(mask, var, src)
