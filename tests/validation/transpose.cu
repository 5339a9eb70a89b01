// The f32 transposes of "Matrix Transpose: The Canonical CUDA Optimization Problem - From Naive
// to Bank-Conflict-Free" (fridayswithfaraday.com, CUDA Kernel Engineering part 18), written here
// from its description for `cargo xtask validate` (perf::validation): a copy (the upper bound),
// the naive transpose (coalesced reads, writes a row apart), the shared-memory tiled one (both
// coalesced, a 32 x 32 tile read down its columns: bank conflicts) and the padded one (the tile
// one word wider a row). Square n x n matrices, n a multiple of 32 (64 for the 64 x 64 tiles).
//
// The same transposes with the parameters of "Optimizing GPU Matrix Transpose: From 14% to 88% of
// Peak Bandwidth" (yencal.github.io; H100, 32768 x 32768): the tiled and padded ones with a
// 32 x 32 block (one element per thread), the padded one with 32 x 16 (two rows per thread; its
// 32 x 8 is `transpose_padded`), and the float4 ones with 32 x 32 tiles and 8 x 32 blocks and
// with 64 x 64 tiles and 16 x 32 blocks.

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
// (`ROWS` rows of threads, TILE / ROWS elements each, in general.)
template <int PAD, int ROWS = 8> __device__ void tiled(const float *in, float *out, int n) {
    constexpr int TILE = 32;
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

// Grid (n / 32, n / 32), block (32, 32): one element per thread.
extern "C" __global__ void transpose_tiled_32x32(const float *in, float *out, int n) {
    tiled<0, 32>(in, out, n);
}

// Grid (n / 32, n / 32), block (32, 32).
extern "C" __global__ void transpose_padded_32x32(const float *in, float *out, int n) {
    tiled<1, 32>(in, out, n);
}

// Grid (n / 32, n / 32), block (32, 16): two elements per thread.
extern "C" __global__ void transpose_padded_32x16(const float *in, float *out, int n) {
    tiled<1, 16>(in, out, n);
}

// A TILE x TILE tile, one word of padding a row, moved as float4: each thread reads four
// consecutive words of a row of `in` (one float4) and writes them into four columns of its row
// of the tile; after the barrier it gathers four words down a column of the tile and writes them
// as one float4 along a row of `out`. Blocks of TILE / 4 x ROWS threads, TILE / ROWS float4 each
// way per thread.
template <int TILE, int ROWS> __device__ void tiled_vec4(const float *in, float *out, int n) {
    __shared__ float tile[TILE][TILE + 1];
    const int w = n / 4;
    const int x = blockIdx.x * (TILE / 4) + threadIdx.x;
    const int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        const float4 v = reinterpret_cast<const float4 *>(in)[(y + j) * w + x];
        float *t = &tile[threadIdx.y + j][threadIdx.x * 4];
        t[0] = v.x;
        t[1] = v.y;
        t[2] = v.z;
        t[3] = v.w;
    }
    __syncthreads();
    const int ox = blockIdx.y * (TILE / 4) + threadIdx.x;
    const int oy = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        float4 v;
        v.x = tile[threadIdx.x * 4 + 0][threadIdx.y + j];
        v.y = tile[threadIdx.x * 4 + 1][threadIdx.y + j];
        v.z = tile[threadIdx.x * 4 + 2][threadIdx.y + j];
        v.w = tile[threadIdx.x * 4 + 3][threadIdx.y + j];
        reinterpret_cast<float4 *>(out)[(oy + j) * w + ox] = v;
    }
}

// 32 x 32 tiles: grid (n / 32, n / 32), block (8, 32), one float4 each way per thread.
extern "C" __global__ void transpose_vec4_t32(const float *in, float *out, int n) {
    tiled_vec4<32, 32>(in, out, n);
}

// 64 x 64 tiles: grid (n / 64, n / 64), block (16, 32), two float4 each way per thread.
extern "C" __global__ void transpose_vec4_t64(const float *in, float *out, int n) {
    tiled_vec4<64, 32>(in, out, n);
}
