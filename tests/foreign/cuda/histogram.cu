// A 256-bin histogram of bytes (`histogram_u8`: (data, bins, n), n bytes as u32 words of 4): each
// block counts into its own shared bins with shared-memory atomics, then adds them to the global
// bins with global atomics. Blocks of 256 threads, a grid-stride loop.
#define BINS 256

extern "C" __global__ void histogram_u8(const unsigned *data, unsigned *bins, unsigned n) {
    __shared__ unsigned local[BINS];
    local[threadIdx.x] = 0;
    __syncthreads();
    unsigned words = n / 4;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x) {
        unsigned w = data[i];
        for (int k = 0; k < 4; k++) {
            atomicAdd(&local[(w >> (8 * k)) & 0xff], 1u);
        }
    }
    __syncthreads();
    if (local[threadIdx.x] != 0) {
        atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
    }
}
