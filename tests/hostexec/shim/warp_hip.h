// AMD cross-lane builtins of codegen/hip.py (shuffles, DPP moves, votes, permutes) on the
// rendezvous of host.h, each from the instruction's definition in the CDNA3 ISA (wave64). An
// extension header (README.md, "Cross-lane builtins"): a kernel that calls them runs as fibers.
// On the host every lane of the wave that has not returned takes part (a rendezvous cannot be
// reached by some lanes only); a returned lane reads as inactive.
#pragma once

// (read between the two rendezvous of an exchange: after it, a lane may have returned)
static inline bool opus_host_lane_active(unsigned lane) {
  return (opus_host_warp_live_mask() >> lane) & 1;
}

// v_readlane_b32: lane `src`'s value, in every lane (src wave-uniform, taken mod 64)
static inline int opus_host_readlane(int x, int src) {
  return (int)opus_host_read_lane((unsigned)x, (unsigned)src % OPUS_HOST_WARP);
}

// ds_bpermute_b32 addr, data: each lane reads data of lane (addr / 4) mod 64 (a backward
// permute); reading an inactive lane gives 0
static inline int opus_host_ds_bpermute(int addr, int data) {
  unsigned src = ((unsigned)addr >> 2) % OPUS_HOST_WARP;
  unsigned long long live;
  unsigned v = opus_host_read_lane((unsigned)data, src, &live);
  return (live >> src) & 1 ? (int)v : 0;
}

// ds_permute_b32 addr, data: each active lane sends data to lane (addr / 4) mod 64 (a forward
// permute); a lane several send to gets the highest sender's, one none sends to gets 0
static inline int opus_host_ds_permute(int addr, int data) {
  unsigned me = opus_host_lane(), pair[2] = {((unsigned)addr >> 2) % OPUS_HOST_WARP, (unsigned)data};
  memcpy(opus_host_xchg(me), pair, sizeof pair);
  opus_host_warp_rendezvous();
  unsigned r = 0;
  for (unsigned l = 0; l < OPUS_HOST_WARP; l++) {
    if (!opus_host_lane_active(l)) continue;
    unsigned sent[2];
    memcpy(sent, opus_host_xchg(l), sizeof sent);
    if (sent[0] == me) r = sent[1];
  }
  opus_host_warp_rendezvous();
  return (int)r;
}

// v_cmp ... to an SGPR pair (__builtin_amdgcn_ballot_w64): bit l set where lane l's p is true
static inline unsigned long long opus_host_ballot(bool p) {
  unsigned me = opus_host_lane(), v = p ? 1u : 0u;
  memcpy(opus_host_xchg(me), &v, sizeof v);
  opus_host_warp_rendezvous();
  unsigned long long m = 0;
  for (unsigned l = 0; l < OPUS_HOST_WARP; l++) {
    unsigned b;
    memcpy(&b, opus_host_xchg(l), sizeof b);
    if (opus_host_lane_active(l) && b) m |= 1ull << l;
  }
  opus_host_warp_rendezvous();
  return m;
}

// The lane DPP control `ctrl` makes lane `l` read (CDNA3 ISA, "DPP"; rows of 16 lanes, r = l
// mod 16), or -1 where it reads no lane: quad_perm 0x00-0xff (lane ctrl[2q+1:2q] of the quad,
// q = l mod 4), row_shl 0x101-0x10f (r + n), row_shr 0x111-0x11f (r - n), row_ror 0x121-0x12f
// ((r - n) mod 16), wave_shl 0x130 (l + 1), wave_rol 0x134, wave_shr 0x138 (l - 1), wave_ror
// 0x13c, row_mirror 0x140 (15 - r), row_half_mirror 0x141 (7 - l mod 8), row_bcast15 0x142
// (lane 15 of the row before), row_bcast31 0x143 (lane 31, for rows 2 and 3)
static inline int opus_host_dpp_source(int l, int ctrl) {
  int row = l & ~15, r = l & 15, n = ctrl & 15;
  if (ctrl <= 0xff) return (l & ~3) | ((ctrl >> (2 * (l & 3))) & 3);
  if (ctrl >= 0x101 && ctrl <= 0x10f) return r + n < 16 ? l + n : -1;
  if (ctrl >= 0x111 && ctrl <= 0x11f) return r >= n ? l - n : -1;
  if (ctrl >= 0x121 && ctrl <= 0x12f) return row | ((r - n) & 15);
  switch (ctrl) {
    case 0x130: return l + 1 < (int)OPUS_HOST_WARP ? l + 1 : -1;
    case 0x134: return (l + 1) % (int)OPUS_HOST_WARP;
    case 0x138: return l >= 1 ? l - 1 : -1;
    case 0x13c: return (l + (int)OPUS_HOST_WARP - 1) % (int)OPUS_HOST_WARP;
    case 0x140: return row | (15 - r);
    case 0x141: return (l & ~7) | (7 - (l & 7));
    case 0x142: return row >= 16 ? row - 1 : -1;
    case 0x143: return row >= 32 ? 31 : -1;
  }
  opus_host_fail("__builtin_amdgcn_update_dpp: a dpp_ctrl the shim does not know");
  return -1;
}

// v_mov_b32 with DPP as llvm.amdgcn.update.dpp(old, src, ctrl, row_mask, bank_mask,
// bound_ctrl) defines it: d = old, then a lane whose row (l / 16) bit of row_mask and bank
// ((l mod 16) / 4) bit of bank_mask are both set is written: src of its DPP source lane, or,
// where it reads no lane or an inactive one, 0 with bound_ctrl and nothing (old) without it
static inline int opus_host_update_dpp(int old, int src, int ctrl, int row_mask, int bank_mask,
                                       bool bound_ctrl) {
  int l = (int)opus_host_lane(), s = opus_host_dpp_source(l, ctrl);
  unsigned long long live;
  unsigned v = opus_host_read_lane((unsigned)src, s < 0 ? (unsigned)l : (unsigned)s, &live);
  if (!((row_mask >> (l >> 4)) & 1) || !((bank_mask >> ((l & 15) >> 2)) & 1)) return old;
  if (s < 0 || !((live >> s) & 1)) return bound_ctrl ? 0 : old;
  return (int)v;
}

#define __builtin_amdgcn_readlane(x, src) opus_host_readlane(x, src)
#define __builtin_amdgcn_ds_bpermute(addr, data) opus_host_ds_bpermute(addr, data)
#define __builtin_amdgcn_ds_permute(addr, data) opus_host_ds_permute(addr, data)
#define __builtin_amdgcn_ballot_w64(p) opus_host_ballot(p)
#define __builtin_amdgcn_update_dpp(old, src, ctrl, rm, bm, bc) opus_host_update_dpp(old, src, ctrl, rm, bm, bc)
