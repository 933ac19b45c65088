"""Hand-written headerless CUDA kernels shared by the runtime tests."""

# 16-byte vector loads through uint4 must become LDG.E.128.
VEC_ADD = r"""
extern "C" __global__ void vec_add(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * i + 3 < n) {
    uint4 x = *(const uint4*)(a + 4 * i);
    uint4 y = *(const uint4*)(b + 4 * i);
    float4 r;
    r.x = __uint_as_float(x.x) + __uint_as_float(y.x);
    r.y = __uint_as_float(x.y) + __uint_as_float(y.y);
    r.z = __uint_as_float(x.z) + __uint_as_float(y.z);
    r.w = __uint_as_float(x.w) + __uint_as_float(y.w);
    *(float4*)(c + 4 * i) = r;
  }
}
"""

# Scalar add with a scalar parameter (alpha) to exercise float parameters.
AXPY = r"""
extern "C" __global__ void axpy(float alpha, const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}
"""

# Dynamic shared memory: copy through a smem buffer of `n` floats.
SMEM_COPY = r"""
extern "C" __global__ void smem_copy(const float* src, float* dst, int n) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) dst[n - 1 - i] = buf[i];
}
"""
