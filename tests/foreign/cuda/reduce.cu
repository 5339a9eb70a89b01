// Warp-level reductions with the ISA's warp collectives (`count_sum_u32`: (data, out, n)): each
// warp counts its positive elements with a vote (__ballot_sync, popc) and sums them with
// redux.sync (__reduce_add_sync, sm_80), lane 0 adds both to out[0] (count) and out[1] (sum) with
// global atomics. Elements past n vote false and add 0. Blocks of 256 threads.
extern "C" __global__ void count_sum_u32(const int *data, unsigned *out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? data[i] : 0;
    unsigned active = __activemask();
    unsigned ballot = __ballot_sync(active, v > 0);
    unsigned sum = __reduce_add_sync(active, v > 0 ? (unsigned)v : 0u);
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&out[0], __popc(ballot));
        atomicAdd(&out[1], sum);
    }
}
