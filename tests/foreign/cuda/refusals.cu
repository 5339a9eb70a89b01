// Kernels whose NVRTC output uses what a hand-written kernel rarely does: `warpSize`, `assert`,
// bf16 atomics and conversions, and (in -G builds) a helper returning a 16-byte struct and a
// call through a function pointer.
#include <cuda_bf16.h>
// CUDA's assert, spelled out: NVRTC ships no <assert.h>.
extern "C" __device__ void __assertfail(const char *message, const char *file, unsigned line,
                                        const char *function, size_t char_size);
#define check(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))

// Each thread writes its warp and lane, computed with warpSize.
extern "C" __global__ void warp_and_lane(int *out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = (threadIdx.x / warpSize) * 100 + threadIdx.x % warpSize;
}

// Scatters each thread's index to the slot it is given, asserting the slot is in range.
extern "C" __global__ void checked_scatter(const int *slots, int *out, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int s = slots[t];
    check(s >= 0 && s < n);
    out[s] = t;
}

// A bf16 pair histogram: each thread adds (1, 0.5) to the pair of bins it is given.
extern "C" __global__ void bf16x2_histogram(const int *bins, __nv_bfloat162 *hist) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&hist[bins[t]], __floats2bfloat162_rn(1.0f, 0.5f));
}

// Integers to bf16, rounded to nearest even.
extern "C" __global__ void int_to_bf16(const int *in, __nv_bfloat16 *out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = __int2bfloat16_rn(in[t]);
}

// Four floats at once (a 128-bit load), returned by value from a helper.
__device__ float4 load_quad(const float *p) {
    return *reinterpret_cast<const float4 *>(p);
}

// Each thread sums four consecutive floats read as one 128-bit load.
extern "C" __global__ void sum_of_quads(const float *in, float *out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float4 q = load_quad(in + 4 * t);
    out[t] = q.x + q.y + q.z + q.w;
}

__device__ float twice(float x) { return 2.0f * x; }
__device__ float square(float x) { return x * x; }

// Applies one of two functions, chosen by `which`, through a function pointer.
extern "C" __global__ void apply_pointer(const float *in, float *out, int which) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float (*f)(float) = which ? square : twice;
    out[t] = f(in[t]);
}
