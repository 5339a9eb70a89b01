// C = A B (+ C), the project's GEMM entries and parameter lists: (a, b, c, m, n, k, accumulate),
// A M x K and B K x N row-major, C M x N f32; accumulate 0 overwrites C, 1 adds to it.
//
// gemm_tiled_f32: blocks of 32 x 32 threads, one 32 x 32 tile of C each, K staged 32 deep through
// two shared tiles declared inside the kernel (function-scope .shared in NVVM's PTX).
//
// gemm_tensor_core_bf16: the project's launch (a one-dimensional grid of ceil(M/128) *
// ceil(N/128) blocks of 256 threads, 96 KiB of dynamic shared memory this version leaves unused),
// a 128 x 128 tile of C per block, 8 warps of 64 x 32 each, every product an inline
// mma.sync.m16n8k16 whose fragments are gathered straight from global memory, element by element,
// as the PTX ISA lays them out ("Matrix Fragments for mma.m16n8k16 with floating point type"). No
// cuda_bf16.h: the bf16 inputs are their 16-bit patterns. The loops over the warp's 4 x 4 tiles of
// 16 x 8 stay loops (`#pragma unroll 1`): the PTX stays small, and the fragments and accumulators
// they index live in local memory.
#define T 32

extern "C" __global__ void gemm_tiled_f32(const float *a, const float *b, float *c, unsigned m, unsigned n,
                                          unsigned k, unsigned accumulate) {
    __shared__ float a_tile[T][T];
    __shared__ float b_tile[T][T];
    unsigned tx = threadIdx.x, ty = threadIdx.y;
    unsigned row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (unsigned k0 = 0; k0 < k; k0 += T) {
        a_tile[ty][tx] = (row < m && k0 + tx < k) ? a[row * k + k0 + tx] : 0.0f;
        b_tile[ty][tx] = (k0 + ty < k && col < n) ? b[(k0 + ty) * n + col] : 0.0f;
        __syncthreads();
        for (unsigned kk = 0; kk < T; kk++) {
            acc += a_tile[ty][kk] * b_tile[kk][tx];
        }
        __syncthreads();
    }
    if (row < m && col < n) {
        unsigned i = row * n + col;
        c[i] = accumulate ? acc + c[i] : acc;
    }
}

// One bf16 of a row-major matrix (rows x cols), 0 outside it.
__device__ unsigned bf16_at(const unsigned short *x, unsigned r, unsigned q, unsigned rows, unsigned cols) {
    return (r < rows && q < cols) ? x[r * cols + q] : 0u;
}

// Two bf16 in one .b32 register: the first (lower index) in the low half.
__device__ unsigned pack(unsigned lo, unsigned hi) { return lo | (hi << 16); }

extern "C" __global__ void gemm_tensor_core_bf16(const unsigned short *a, const unsigned short *b, float *c,
                                                 unsigned m, unsigned n, unsigned k, unsigned accumulate) {
    unsigned blocks_n = (n + 127) / 128;
    unsigned tile_row = blockIdx.x / blocks_n, tile_col = blockIdx.x % blocks_n;
    unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned group = lane / 4, tig = lane % 4;  // groupID, threadID_in_group
    unsigned row0 = tile_row * 128 + (warp / 4) * 64, col0 = tile_col * 128 + (warp % 4) * 32;
    float acc[4][4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
    for (unsigned k0 = 0; k0 < k; k0 += 16) {
        // A fragments (16 x 16, row): a0 = rows g, cols 2t..2t+1; a1 = row g+8; a2 = cols +8;
        // a3 = row g+8, cols +8.
        unsigned fa[4][4];
#pragma unroll 1
        for (int i = 0; i < 4; i++) {
            unsigned r = row0 + 16 * i + group, q = k0 + 2 * tig;
            fa[i][0] = pack(bf16_at(a, r, q, m, k), bf16_at(a, r, q + 1, m, k));
            fa[i][1] = pack(bf16_at(a, r + 8, q, m, k), bf16_at(a, r + 8, q + 1, m, k));
            fa[i][2] = pack(bf16_at(a, r, q + 8, m, k), bf16_at(a, r, q + 9, m, k));
            fa[i][3] = pack(bf16_at(a, r + 8, q + 8, m, k), bf16_at(a, r + 8, q + 9, m, k));
        }
        // B fragments (16 x 8, col): b0 = rows (of K) 2t..2t+1 of column g; b1 = rows +8.
        unsigned fb[4][2];
#pragma unroll 1
        for (int j = 0; j < 4; j++) {
            unsigned q = col0 + 8 * j + group, r = k0 + 2 * tig;
            fb[j][0] = pack(bf16_at(b, r, q, k, n), bf16_at(b, r + 1, q, k, n));
            fb[j][1] = pack(bf16_at(b, r + 8, q, k, n), bf16_at(b, r + 9, q, k, n));
        }
#pragma unroll 1
        for (int i = 0; i < 4; i++)
#pragma unroll 1
            for (int j = 0; j < 4; j++) {
                float *d = acc[i][j];
                asm volatile(
                    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                    "{%8,%9}, {%0,%1,%2,%3};"
                    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                    : "r"(fa[i][0]), "r"(fa[i][1]), "r"(fa[i][2]), "r"(fa[i][3]), "r"(fb[j][0]), "r"(fb[j][1]));
            }
    }
    // C fragments (16 x 8 f32): c0, c1 = row g, cols 2t..2t+1; c2, c3 = row g+8.
#pragma unroll 1
    for (int i = 0; i < 4; i++)
#pragma unroll 1
        for (int j = 0; j < 4; j++)
            for (int e = 0; e < 4; e++) {
                unsigned r = row0 + 16 * i + group + 8 * (e / 2), q = col0 + 8 * j + 2 * tig + e % 2;
                if (r < m && q < n) {
                    unsigned x = r * n + q;
                    c[x] = accumulate ? acc[i][j][e] + c[x] : acc[i][j][e];
                }
            }
}
