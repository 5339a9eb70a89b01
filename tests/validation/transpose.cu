// The f32 transposes of "Matrix Transpose: The Canonical CUDA Optimization Problem - From Naive
// to Bank-Conflict-Free" (fridayswithfaraday.com, CUDA Kernel Engineering part 18), written here
// from its description for `cargo xtask validate` (perf::validation): a copy (the upper bound),
// the naive transpose (coalesced reads, writes a row apart), the shared-memory tiled one (both
// coalesced, a 32 x 32 tile read down its columns: bank conflicts) and the padded one (the tile
// one word wider a row). Square n x n matrices, n a multiple of 32.

// out[i] = in[i]; blocks of 256 threads, one element each. Grid (n * n / 256).
extern "C" __global__ void copy(const float *in, float *out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * n) {
        out[i] = in[i];
    }
}

// out[col][row] = in[row][col], one element per thread, blocks of 32 x 32 threads along a row of
// `in`. Grid (n / 32, n / 32), block (32, 32).
extern "C" __global__ void transpose_naive(const float *in, float *out, int n) {
    const int col = blockIdx.x * 32 + threadIdx.x;
    const int row = blockIdx.y * 32 + threadIdx.y;
    if (row < n && col < n) {
        out[col * n + row] = in[row * n + col];
    }
}

// A 32 x 32 tile through shared memory, `PAD` words more per row of it: read along the rows of
// `in`, written along the rows of `out`. Blocks of 32 x 8 threads, four elements each.
template <int PAD> __device__ void tiled(const float *in, float *out, int n) {
    constexpr int TILE = 32, ROWS = 8;
    __shared__ float tile[TILE][TILE + PAD];
    const int x = blockIdx.x * TILE + threadIdx.x;
    const int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    }
    __syncthreads();
    const int ox = blockIdx.y * TILE + threadIdx.x;
    const int oy = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        out[(oy + j) * n + ox] = tile[threadIdx.x][threadIdx.y + j];
    }
}

// Grid (n / 32, n / 32), block (32, 8).
extern "C" __global__ void transpose_tiled(const float *in, float *out, int n) {
    tiled<0>(in, out, n);
}

// Grid (n / 32, n / 32), block (32, 8).
extern "C" __global__ void transpose_padded(const float *in, float *out, int n) {
    tiled<1>(in, out, n);
}
