// The host shim's runtime: runs a kernel over a whole grid with every thread of a block as a
// fiber (ucontext) on one OS thread. Blocks run one after another; within a block, lanes run
// in order of their linear thread id until they reach a barrier, a warp rendezvous or their
// end. A block barrier releases when every lane that has not returned waits at one; a warp
// rendezvous releases a warp when every lane of it that has not returned waits at one.
// Anything else (some lanes at a block barrier, others of the same warp at a rendezvous) is
// reported as divergence and the launch fails. Deterministic: no OS threads, no data races.
//
// Cross-lane hook (README.md, "Cross-lane builtins"): a shim of a warp-wide instruction writes
// its lane's operands into opus_host_xchg(opus_host_lane()), calls opus_host_warp_rendezvous(),
// reads what it needs from the other lanes' slots, and calls opus_host_warp_rendezvous() again
// before it returns (so no lane overwrites its slot while another still reads it).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>

#include "floats.h"

#ifndef OPUS_HOST_WARP
#error "the runner defines OPUS_HOST_WARP (the target's warp size)"
#endif

struct opus_host_dim3 { unsigned x, y, z; };

namespace opus_host_rt {

enum Wait { RUNNING, AT_BARRIER, AT_RENDEZVOUS, RETURNED };
const size_t STACK_BYTES = 256 * 1024;
const size_t XCHG_BYTES = 1024;  // per lane: room for a lane's operands of a warp-wide op

struct Lane { ucontext_t ctx; opus_host_dim3 tid; unsigned linear; Wait wait; };

struct State {
  opus_host_dim3 bid, bdim, gdim;
  Lane* lanes = nullptr;
  char* stacks = nullptr;
  unsigned char* xchg = nullptr;
  unsigned capacity = 0, nlanes = 0;
  Lane* cur = nullptr;
  ucontext_t sched;
  unsigned char* dyn_smem = nullptr;
  void (*body)(void**) = nullptr;  // the kernel's launcher: unpacks the arguments, calls it
  void** args = nullptr;
  bool fibers = false;  // lanes are fibers (the kernel may wait); else plain calls in turn
};

}  // namespace opus_host_rt

static opus_host_rt::State opus_host;

static inline void opus_host_fail(const char* what) {
  fprintf(stderr, "opus-hostexec: %s (block %u,%u,%u)\n", what, opus_host.bid.x, opus_host.bid.y,
          opus_host.bid.z);
  exit(3);
}

static inline void opus_host_wait(opus_host_rt::Wait w) {
  if (!opus_host.fibers)
    opus_host_fail("a kernel the runner took for lane-local waited at a barrier or rendezvous "
                   "(tests/hostexec/runner.py: _needs_fibers)");
  opus_host_rt::Lane* me = opus_host.cur;
  me->wait = w;
  swapcontext(&me->ctx, &opus_host.sched);
}

// __syncthreads / s_barrier: every lane of the block that has not returned must arrive
static inline void opus_host_syncthreads() { opus_host_wait(opus_host_rt::AT_BARRIER); }
// every lane of the calling lane's warp that has not returned must arrive
static inline void opus_host_warp_rendezvous() { opus_host_wait(opus_host_rt::AT_RENDEZVOUS); }
static inline unsigned opus_host_linear() { return opus_host.cur->linear; }
static inline unsigned opus_host_lane() { return opus_host.cur->linear % OPUS_HOST_WARP; }
// lane `lane` of the calling lane's warp: its exchange slot (XCHG_BYTES bytes, 16-aligned)
static inline void* opus_host_xchg(unsigned lane) {
  unsigned first = opus_host.cur->linear - opus_host_lane();
  return opus_host.xchg + (size_t)(first + lane) * opus_host_rt::XCHG_BYTES;
}
// bit i set: lane i of the calling lane's warp exists and has not returned
static inline unsigned long long opus_host_warp_live_mask() {
  unsigned first = opus_host.cur->linear - opus_host_lane();
  unsigned long long m = 0;
  for (unsigned i = 0; i < OPUS_HOST_WARP && first + i < opus_host.nlanes; i++)
    if (opus_host.lanes[first + i].wait != opus_host_rt::RETURNED) m |= 1ull << i;
  return m;
}
// every live lane of the warp publishes `word` and reads lane `src`'s (the warp shims' exchange);
// `live`, when given, gets the warp's live lanes as they were at the exchange (after it, a lane
// that went on may have returned)
static inline unsigned opus_host_read_lane(unsigned word, unsigned src,
                                           unsigned long long* live = nullptr) {
  memcpy(opus_host_xchg(opus_host_lane()), &word, sizeof word);
  opus_host_warp_rendezvous();
  unsigned r;
  memcpy(&r, opus_host_xchg(src), sizeof r);
  if (live) *live = opus_host_warp_live_mask();
  opus_host_warp_rendezvous();
  return r;
}

namespace opus_host_rt {

static void lane_main() {
  opus_host.body(opus_host.args);
  opus_host.cur->wait = RETURNED;  // uc_link resumes the scheduler
}

static void reserve(unsigned n) {
  if (n <= opus_host.capacity) return;
  free(opus_host.lanes); free(opus_host.stacks); free(opus_host.xchg);
  opus_host.lanes = (Lane*)calloc(n, sizeof(Lane));
  opus_host.stacks = (char*)malloc(n * STACK_BYTES);
  opus_host.xchg = (unsigned char*)aligned_alloc(16, n * XCHG_BYTES);
  if (!opus_host.lanes || !opus_host.stacks || !opus_host.xchg) opus_host_fail("out of memory");
  opus_host.capacity = n;
}

// Release the lanes that may go on; false when none may (a deadlock: divergence)
static bool release() {
  bool any = false, all_at_barrier = true, live = false;
  unsigned nwarps = (opus_host.nlanes + OPUS_HOST_WARP - 1) / OPUS_HOST_WARP;
  for (unsigned w = 0; w < nwarps; w++) {
    bool full = true, some = false;
    for (unsigned i = w * OPUS_HOST_WARP; i < opus_host.nlanes && i < (w + 1) * OPUS_HOST_WARP; i++) {
      Wait s = opus_host.lanes[i].wait;
      if (s == RETURNED) continue;
      live = true;
      if (s != AT_RENDEZVOUS) full = false; else some = true;
      if (s != AT_BARRIER) all_at_barrier = false;
    }
    if (some && full) {
      for (unsigned i = w * OPUS_HOST_WARP; i < opus_host.nlanes && i < (w + 1) * OPUS_HOST_WARP; i++)
        if (opus_host.lanes[i].wait == AT_RENDEZVOUS) opus_host.lanes[i].wait = RUNNING;
      any = true;
    }
  }
  if (!live) return true;
  if (!any && all_at_barrier) {
    for (unsigned i = 0; i < opus_host.nlanes; i++)
      if (opus_host.lanes[i].wait == AT_BARRIER) opus_host.lanes[i].wait = RUNNING;
    any = true;
  }
  return any;
}

static bool all_returned() {
  for (unsigned i = 0; i < opus_host.nlanes; i++)
    if (opus_host.lanes[i].wait != RETURNED) return false;
  return true;
}

static void run_block() {
  opus_host_dim3 d = opus_host.bdim;
  static ucontext_t fresh;
  static bool have_fresh = false;
  if (!have_fresh) { getcontext(&fresh); have_fresh = true; }
  for (unsigned i = 0; i < opus_host.nlanes; i++) {
    Lane& l = opus_host.lanes[i];
    l.linear = i;
    l.tid = {i % d.x, (i / d.x) % d.y, i / (d.x * d.y)};
    l.wait = RUNNING;
    if (!opus_host.fibers) {  // lane-local kernel: each lane runs to its end in turn
      opus_host.cur = &l;
      opus_host.body(opus_host.args);
      l.wait = RETURNED;
      continue;
    }
    l.ctx = fresh;
    l.ctx.uc_stack.ss_sp = opus_host.stacks + (size_t)i * STACK_BYTES;
    l.ctx.uc_stack.ss_size = STACK_BYTES;
    l.ctx.uc_link = &opus_host.sched;
    makecontext(&l.ctx, lane_main, 0);
  }
  if (!opus_host.fibers) return;
  for (;;) {
    for (unsigned i = 0; i < opus_host.nlanes; i++) {
      if (opus_host.lanes[i].wait != RUNNING) continue;
      opus_host.cur = &opus_host.lanes[i];
      swapcontext(&opus_host.sched, &opus_host.lanes[i].ctx);
    }
    if (all_returned()) return;
    if (!release())
      opus_host_fail("lanes diverged at a barrier: some wait at __syncthreads, others of a warp "
                     "at a cross-lane operation");
  }
}

}  // namespace opus_host_rt

// Run `body` (a kernel launcher) over the grid; `fibers`: the kernel may wait (a barrier, a
// cross-lane op), so every lane is a fiber.
static void opus_host_launch(void (*body)(void**), bool fibers, void** args, opus_host_dim3 grid,
                             opus_host_dim3 block, unsigned char* dyn_smem) {
  unsigned n = block.x * block.y * block.z;
  opus_host_rt::reserve(n);
  opus_host.body = body; opus_host.args = args; opus_host.dyn_smem = dyn_smem;
  opus_host.fibers = fibers;
  opus_host.bdim = block; opus_host.gdim = grid; opus_host.nlanes = n;
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        opus_host.bid = {x, y, z};
        opus_host_rt::run_block();
      }
}
