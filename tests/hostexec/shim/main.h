// The host program's main: reads launches from argv[1], runs them, writes the array arguments
// back to argv[2] (protocol: tests/hostexec/runner.py, _pack_launches / _unpack_results).
// Included last, after the runner's table of kernel launchers (opus_host_kernels).
#pragma once
#include <string>
#include <vector>

namespace opus_host_rt {

const size_t GUARD = 4096;         // bytes before and after each array argument
const unsigned char GUARD_BYTE = 0x5A;  // an out-of-bounds read sees these, never 0
const unsigned char SMEM_BYTE = 0xCD;   // dynamic shared memory starts as garbage

struct Reader {
  const unsigned char* p; const unsigned char* end;
  uint64_t u64() { uint64_t v; if (p + 8 > end) opus_host_fail("truncated launch file"); memcpy(&v, p, 8); p += 8; return v; }
  const unsigned char* bytes(uint64_t n) {
    const unsigned char* q = p; p += (n + 7) & ~7ull;
    if (p > end) opus_host_fail("truncated launch file");
    return q;
  }
};

static void put(FILE* f, uint64_t v) { fwrite(&v, 8, 1, f); }
static void put_bytes(FILE* f, const void* b, uint64_t n) {
  put(f, n); fwrite(b, 1, n, f);
  static const unsigned char zero[8] = {0};
  fwrite(zero, 1, (8 - n % 8) % 8, f);
}

// whether a kernel changed a guard byte; `at`: the first one, as an offset from the array
static bool guard_hit(const unsigned char* data, uint64_t n, long long* at) {
  for (size_t i = 0; i < GUARD; i++)
    if (data[(long long)i - (long long)GUARD] != GUARD_BYTE) { *at = (long long)i - (long long)GUARD; return true; }
  for (size_t i = 0; i < GUARD; i++)
    if (data[n + i] != GUARD_BYTE) { *at = (long long)(n + i); return true; }
  return false;
}

}  // namespace opus_host_rt

int main(int argc, char** argv) {
  using namespace opus_host_rt;
  if (argc != 3) { fprintf(stderr, "usage: %s launches results\n", argv[0]); return 2; }
  FILE* in = fopen(argv[1], "rb");
  if (!in) { perror(argv[1]); return 2; }
  std::vector<unsigned char> file;
  unsigned char chunk[1 << 16];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, in)) > 0) file.insert(file.end(), chunk, chunk + got);
  fclose(in);
  Reader r{file.data(), file.data() + file.size()};
  if (r.u64() != 0x48434e55414c504full) opus_host_fail("not a launch file");
  FILE* out = fopen(argv[2], "wb");
  if (!out) { perror(argv[2]); return 2; }
  uint64_t nlaunch = r.u64();
  for (uint64_t L = 0; L < nlaunch; L++) {
    uint64_t k = r.u64();
    opus_host_dim3 grid, block;
    grid.x = r.u64(); grid.y = r.u64(); grid.z = r.u64();
    block.x = r.u64(); block.y = r.u64(); block.z = r.u64();
    uint64_t smem = r.u64(), nargs = r.u64();
    if (k >= sizeof(opus_host_kernels) / sizeof(opus_host_kernels[0])) opus_host_fail("no such kernel");
    std::vector<void*> args(nargs), slots(nargs);
    std::vector<unsigned char*> arrays(nargs, nullptr);
    std::vector<uint64_t> sizes(nargs);
    for (uint64_t i = 0; i < nargs; i++) {
      uint64_t kind = r.u64(), n = r.u64();
      const unsigned char* b = r.bytes(n);
      sizes[i] = n;
      if (kind == 1) {  // an array: copied between guards, 256-byte aligned (as cudaMalloc)
        unsigned char* base = (unsigned char*)aligned_alloc(256, ((2 * GUARD + n + 255) / 256) * 256);
        memset(base, GUARD_BYTE, 2 * GUARD + n);
        arrays[i] = base + GUARD;
        memcpy(arrays[i], b, n);
        slots[i] = arrays[i];
        args[i] = &slots[i];
      } else {
        args[i] = (void*)b;  // the scalar's bytes (8-aligned in the file buffer)
      }
    }
    std::vector<unsigned char> dyn(smem + 16, SMEM_BYTE);
    unsigned char* dyn16 = dyn.data() + ((16 - (uintptr_t)dyn.data() % 16) % 16);
    opus_host_launch(opus_host_kernels[k], opus_host_kernel_fibers[k], args.data(), grid, block, dyn16);
    fflush(stdout);
    std::string error;
    for (uint64_t i = 0; i < nargs; i++) {
      if (!arrays[i]) continue;
      long long at;
      if (guard_hit(arrays[i], sizes[i], &at)) {
        error += "launch " + std::to_string(L) + " (kernel " + opus_host_kernel_names[k] +
                 "): argument " + std::to_string(i) + " was written out of bounds, at byte " +
                 std::to_string(at) + " of a " + std::to_string(sizes[i]) + "-byte array\n";
      }
    }
    put(out, error.size() ? 1 : 0);
    put_bytes(out, error.data(), error.size());
    for (uint64_t i = 0; i < nargs; i++) {
      if (!arrays[i]) continue;
      put_bytes(out, arrays[i], sizes[i]);
      free(arrays[i] - GUARD);
    }
    fflush(out);  // the runner counts finished launches when one crashes
  }
  fclose(out);
  return 0;
}
