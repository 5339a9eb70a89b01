// The two f32 CUDA-core GEMMs of waynehacking8/blackwell-tensorcore-kernels
// (https://github.com/waynehacking8/blackwell-tensorcore-kernels), written here from the
// repository's description of them for `cargo xtask validate` (perf::validation): a naive one
// (one thread per element of C, 16 x 16 blocks) and a shared-memory tiled one (32 x 32 tiles of A
// and B, one 32 x 32 block per tile of C). Both compute C = A B for row-major A (M x K), B (K x N)
// and C (M x N), parameters (A, B, C, M, N, K); the tiled one's
// loads and both kernels' stores are guarded against the edges, as the source's are.

// One thread per element of C, threadIdx.x along a row of C. Grid (N / 16, M / 16), block
// (16, 16): a warp is two half-rows of 16.
extern "C" __global__ void gemm_naive_16x16(const float *A, const float *B, float *C, int M, int N,
                                            int K) {
    const int row = blockIdx.y * 16 + threadIdx.y;
    const int col = blockIdx.x * 16 + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = acc;
    }
}

// A 32 x 32 tile of A and one of B through shared memory per step along K, each thread one
// element of each and one element of C. Grid (N / 32, M / 32), block (32, 32).
extern "C" __global__ void gemm_tiled_32(const float *A, const float *B, float *C, int M, int N,
                                         int K) {
    constexpr int T = 32;
    __shared__ float as[T][T];
    __shared__ float bs[T][T];
    const int row = blockIdx.y * T + threadIdx.y;
    const int col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        // Guarded against the matrices' edges, as the source's are (zeros past them).
        const int ak = k0 + threadIdx.x, bk = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (col < N && bk < K) ? B[bk * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; ++k) {
            acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[row * N + col] = acc;
    }
}
