// The f32 SGEMM steps of Simon Boehm's worklog, "How to Optimize a CUDA Matmul Kernel for
// cuBLAS-like Performance: a Worklog" (https://siboehm.com/articles/22/CUDA-MMM; repository
// siboehm/SGEMM_CUDA), written here from the worklog's description of each step and with its
// parameters (tile sizes, block sizes), for `cargo xtask validate`, which predicts each at the
// worklog's size and sets the prediction beside the published figure (perf::validation).
//
// Every entry computes C = alpha * A B + beta * C for row-major A (M x K), B (K x N), C (M x N),
// with the parameters (M, N, K, alpha, A, B, beta, C). The launch each expects (grid, block) is
// the one perf::validation's rows give; sizes must be multiples of the step's tiles.

// 1: one thread per element of C; a 32 x 32 block, threadIdx.x along the rows of C, so that a
// warp's 32 threads read 32 different rows of A (strided) and the same element of B.
// Grid (M / 32, N / 32), block (32, 32).
extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float *A,
                                       const float *B, float beta, float *C) {
    const int row = blockIdx.x * 32 + threadIdx.x;
    const int col = blockIdx.y * 32 + threadIdx.y;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }
}

// 2: the same work, a warp's threads along a row of C: B's and C's accesses coalesce, A's
// element is one per warp. Grid (M / 32, N / 32), block 1024.
extern "C" __global__ void sgemm_coalesced(int M, int N, int K, float alpha, const float *A,
                                           const float *B, float beta, float *C) {
    const int row = blockIdx.x * 32 + threadIdx.x / 32;
    const int col = blockIdx.y * 32 + threadIdx.x % 32;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }
}

// 3: 32 x 32 tiles of A and B staged in shared memory, each thread still one element of C.
// Grid (M / 32, N / 32), block 1024.
extern "C" __global__ void sgemm_shared(int M, int N, int K, float alpha, const float *A,
                                        const float *B, float beta, float *C) {
    constexpr int T = 32;
    __shared__ float tileA[T * T];
    __shared__ float tileB[T * T];
    const int r = threadIdx.x / T;
    const int c = threadIdx.x % T;
    const float *a = A + blockIdx.x * T * K;
    const float *b = B + blockIdx.y * T;
    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        tileA[r * T + c] = a[r * K + k0 + c];
        tileB[r * T + c] = b[(k0 + r) * N + c];
        __syncthreads();
        for (int k = 0; k < T; ++k) {
            sum += tileA[r * T + k] * tileB[k * T + c];
        }
        __syncthreads();
    }
    float *out = C + (blockIdx.x * T + r) * N + blockIdx.y * T + c;
    *out = alpha * sum + beta * *out;
}

// 4: 1D blocktiling: a 64 x 64 tile of C per block of 512 threads, each thread a column of
// TM = 8 results, over BK = 8 wide slices of A and B in shared memory; the B element is read
// once per slice step and reused for the thread's eight rows. Grid (N / 64, M / 64), block 512.
extern "C" __global__ void sgemm_blocktile_1d(int M, int N, int K, float alpha, const float *A,
                                              const float *B, float beta, float *C) {
    constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
    __shared__ float sA[BM * BK];
    __shared__ float sB[BK * BN];
    const int tcol = threadIdx.x % BN;
    const int trow = threadIdx.x / BN;
    const float *a = A + blockIdx.y * BM * K;
    const float *b = B + blockIdx.x * BN;
    // One element of each slice per thread: 512 = 64 x 8 = 8 x 64.
    const int ar = threadIdx.x / BK, ac = threadIdx.x % BK;
    const int br = threadIdx.x / BN, bc = threadIdx.x % BN;
    float acc[TM] = {0.0f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        sA[ar * BK + ac] = a[ar * K + k0 + ac];
        sB[br * BN + bc] = b[(k0 + br) * N + bc];
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            const float bv = sB[k * BN + tcol];
            for (int i = 0; i < TM; ++i) {
                acc[i] += sA[(trow * TM + i) * BK + k] * bv;
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i) {
        float *out = C + (blockIdx.y * BM + trow * TM + i) * N + blockIdx.x * BN + tcol;
        *out = alpha * acc[i] + beta * *out;
    }
}

// 5: 2D blocktiling: a 128 x 128 tile of C per block of 256 threads, each thread an 8 x 8
// sub-tile from TM + TN values held in registers per step of the BK = 8 slice (an outer
// product). Grid (N / 128, M / 128), block 256.
extern "C" __global__ void sgemm_blocktile_2d(int M, int N, int K, float alpha, const float *A,
                                              const float *B, float beta, float *C) {
    constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, THREADS = 256;
    __shared__ float sA[BM * BK];
    __shared__ float sB[BK * BN];
    const int tcol = threadIdx.x % (BN / TN);
    const int trow = threadIdx.x / (BN / TN);
    const float *a = A + blockIdx.y * BM * K;
    const float *b = B + blockIdx.x * BN;
    const int ar = threadIdx.x / BK, ac = threadIdx.x % BK;
    const int br = threadIdx.x / BN, bc = threadIdx.x % BN;
    constexpr int strideA = THREADS / BK, strideB = THREADS / BN;
    float acc[TM * TN] = {0.0f};
    float ra[TM], rb[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int o = 0; o < BM; o += strideA) {
            sA[(ar + o) * BK + ac] = a[(ar + o) * K + k0 + ac];
        }
        for (int o = 0; o < BK; o += strideB) {
            sB[(br + o) * BN + bc] = b[(k0 + br + o) * N + bc];
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            for (int i = 0; i < TM; ++i) {
                ra[i] = sA[(trow * TM + i) * BK + k];
            }
            for (int j = 0; j < TN; ++j) {
                rb[j] = sB[k * BN + tcol * TN + j];
            }
            for (int i = 0; i < TM; ++i) {
                for (int j = 0; j < TN; ++j) {
                    acc[i * TN + j] += ra[i] * rb[j];
                }
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i) {
        for (int j = 0; j < TN; ++j) {
            float *out =
                C + (blockIdx.y * BM + trow * TM + i) * N + blockIdx.x * BN + tcol * TN + j;
            *out = alpha * acc[i * TN + j] + beta * *out;
        }
    }
}

// How steps 6 to 9 lay the slice of B out in shared memory.
enum class LayoutB {
    // Row by row, as in global memory, stored with float4.
    Rows,
    // Linearised (step 7): for each k, the TN values a thread reads sit (BN / TN) apart, so
    // that the (BN / TN) threads of a row of the block read consecutive words; stored element by
    // element.
    Linear,
    // Padded (step 8): each row of the slice 5 words longer than BN, stored element by element.
    Padded,
};

constexpr int PAD_B = 5;

// Steps 6 to 9: 2D blocktiling with the slice of A transposed in shared memory (column k of the
// slice is a contiguous row, so a thread's TM values of A are consecutive words) and float4
// loads from global memory of A, B and C. Grid (N / BM, M / BM), block THREADS.
template <int BM, int BN, int BK, int TM, int TN, int THREADS, LayoutB LAYOUT>
__device__ void vectorised(int M, int N, int K, float alpha, const float *A, const float *B,
                           float beta, float *C) {
    constexpr int ROW_B = LAYOUT == LayoutB::Padded ? BN + PAD_B : BN;
    __shared__ float sA[BK * BM];
    __shared__ float sB[BK * ROW_B];
    const int tcol = threadIdx.x % (BN / TN);
    const int trow = threadIdx.x / (BN / TN);
    const float *a = A + blockIdx.y * BM * K;
    const float *b = B + blockIdx.x * BN;
    // Loads of four floats: a row of the A slice is BK / 4 of them, a row of B's BN / 4.
    const int ar = threadIdx.x / (BK / 4), ac = threadIdx.x % (BK / 4);
    const int br = threadIdx.x / (BN / 4), bc = threadIdx.x % (BN / 4);
    constexpr int strideA = THREADS * 4 / BK, strideB = THREADS * 4 / BN;
    float acc[TM * TN] = {0.0f};
    float ra[TM], rb[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int o = 0; o < BM; o += strideA) {
            const float4 v = *reinterpret_cast<const float4 *>(&a[(ar + o) * K + k0 + ac * 4]);
            sA[(ac * 4 + 0) * BM + ar + o] = v.x;
            sA[(ac * 4 + 1) * BM + ar + o] = v.y;
            sA[(ac * 4 + 2) * BM + ar + o] = v.z;
            sA[(ac * 4 + 3) * BM + ar + o] = v.w;
        }
        for (int o = 0; o < BK; o += strideB) {
            const int k = br + o;
            const float4 v = *reinterpret_cast<const float4 *>(&b[(k0 + k) * N + bc * 4]);
            if (LAYOUT == LayoutB::Rows) {
                *reinterpret_cast<float4 *>(&sB[k * BN + bc * 4]) = v;
            } else {
                const float e[4] = {v.x, v.y, v.z, v.w};
                for (int c = 0; c < 4; ++c) {
                    const int n = bc * 4 + c;
                    if (LAYOUT == LayoutB::Linear) {
                        sB[(k * TN + n % TN) * (BN / TN) + n / TN] = e[c];
                    } else {
                        sB[k * ROW_B + n] = e[c];
                    }
                }
            }
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            for (int i = 0; i < TM; ++i) {
                ra[i] = sA[k * BM + trow * TM + i];
            }
            for (int j = 0; j < TN; ++j) {
                rb[j] = LAYOUT == LayoutB::Linear ? sB[(k * TN + j) * (BN / TN) + tcol]
                                                  : sB[k * ROW_B + tcol * TN + j];
            }
            for (int i = 0; i < TM; ++i) {
                for (int j = 0; j < TN; ++j) {
                    acc[i * TN + j] += ra[i] * rb[j];
                }
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i) {
        for (int j = 0; j < TN; j += 4) {
            float4 *out = reinterpret_cast<float4 *>(
                &C[(blockIdx.y * BM + trow * TM + i) * N + blockIdx.x * BN + tcol * TN + j]);
            float4 v = *out;
            v.x = alpha * acc[i * TN + j + 0] + beta * v.x;
            v.y = alpha * acc[i * TN + j + 1] + beta * v.y;
            v.z = alpha * acc[i * TN + j + 2] + beta * v.z;
            v.w = alpha * acc[i * TN + j + 3] + beta * v.w;
            *out = v;
        }
    }
}

// 6: vectorised memory access, BM = BN = 128, BK = 8, TM = TN = 8, 256 threads.
extern "C" __global__ void __launch_bounds__(256)
    sgemm_vectorised(int M, int N, int K, float alpha, const float *A, const float *B,
                     float beta, float *C) {
    vectorised<128, 128, 8, 8, 8, 256, LayoutB::Rows>(M, N, K, alpha, A, B, beta, C);
}

// 7: step 6 with B's slice linearised against bank conflicts.
extern "C" __global__ void __launch_bounds__(256)
    sgemm_linearised(int M, int N, int K, float alpha, const float *A, const float *B,
                     float beta, float *C) {
    vectorised<128, 128, 8, 8, 8, 256, LayoutB::Linear>(M, N, K, alpha, A, B, beta, C);
}

// 8: step 6 with B's slice padded by 5 words a row against bank conflicts.
extern "C" __global__ void __launch_bounds__(256)
    sgemm_padded(int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                 float *C) {
    vectorised<128, 128, 8, 8, 8, 256, LayoutB::Padded>(M, N, K, alpha, A, B, beta, C);
}

// 9: step 6 with the worklog's autotuned parameters for the A6000: BK = 16.
extern "C" __global__ void __launch_bounds__(256)
    sgemm_autotuned(int M, int N, int K, float alpha, const float *A, const float *B,
                    float beta, float *C) {
    vectorised<128, 128, 16, 8, 8, 256, LayoutB::Rows>(M, N, K, alpha, A, B, beta, C);
}

// Warptiling (steps 10 and 11): each warp owns a WM x WN tile of the block's, computed as
// WMITER x WNITER sub-tiles of (WM / WMITER) x (WN / WNITER), each thread TM x TN of each
// sub-tile. The slice loads (float4, A transposed) are made by LOADERS threads from `first`.
template <int BM, int BN, int BK, int LOADERS>
__device__ void load_slice(int N, int K, const float *a, const float *b, float *sA, float *sB,
                           int t) {
    const int ar = t / (BK / 4), ac = t % (BK / 4);
    const int br = t / (BN / 4), bc = t % (BN / 4);
    constexpr int strideA = LOADERS * 4 / BK, strideB = LOADERS * 4 / BN;
    for (int o = 0; o < BM; o += strideA) {
        const float4 v = *reinterpret_cast<const float4 *>(&a[(ar + o) * K + ac * 4]);
        sA[(ac * 4 + 0) * BM + ar + o] = v.x;
        sA[(ac * 4 + 1) * BM + ar + o] = v.y;
        sA[(ac * 4 + 2) * BM + ar + o] = v.z;
        sA[(ac * 4 + 3) * BM + ar + o] = v.w;
    }
    for (int o = 0; o < BK; o += strideB) {
        *reinterpret_cast<float4 *>(&sB[(br + o) * BN + bc * 4]) =
            *reinterpret_cast<const float4 *>(&b[(br + o) * N + bc * 4]);
    }
}

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int TM, int TN>
__device__ void warp_tile_step(const float *sA, const float *sB, float *acc, int wrow, int wcol,
                               int lrow, int lcol) {
    constexpr int SUBM = WM / WMITER, SUBN = WN / WNITER;
    float ra[WMITER * TM], rb[WNITER * TN];
    for (int k = 0; k < BK; ++k) {
        for (int m = 0; m < WMITER; ++m) {
            for (int i = 0; i < TM; ++i) {
                ra[m * TM + i] = sA[k * BM + wrow * WM + m * SUBM + lrow * TM + i];
            }
        }
        for (int n = 0; n < WNITER; ++n) {
            for (int j = 0; j < TN; ++j) {
                rb[n * TN + j] = sB[k * BN + wcol * WN + n * SUBN + lcol * TN + j];
            }
        }
        for (int m = 0; m < WMITER; ++m) {
            for (int n = 0; n < WNITER; ++n) {
                for (int i = 0; i < TM; ++i) {
                    for (int j = 0; j < TN; ++j) {
                        acc[(m * TM + i) * (WNITER * TN) + n * TN + j] +=
                            ra[m * TM + i] * rb[n * TN + j];
                    }
                }
            }
        }
    }
}

template <int BM, int BN, int WM, int WN, int WMITER, int WNITER, int TM, int TN>
__device__ void store_warp_tile(int N, float alpha, float beta, float *C, const float *acc,
                                int wrow, int wcol, int lrow, int lcol) {
    constexpr int SUBM = WM / WMITER, SUBN = WN / WNITER;
    float *c = C + (blockIdx.y * BM + wrow * WM) * N + blockIdx.x * BN + wcol * WN;
    for (int m = 0; m < WMITER; ++m) {
        for (int n = 0; n < WNITER; ++n) {
            for (int i = 0; i < TM; ++i) {
                for (int j = 0; j < TN; j += 4) {
                    float4 *out = reinterpret_cast<float4 *>(
                        &c[(m * SUBM + lrow * TM + i) * N + n * SUBN + lcol * TN + j]);
                    const float *r = &acc[(m * TM + i) * (WNITER * TN) + n * TN + j];
                    float4 v = *out;
                    v.x = alpha * r[0] + beta * v.x;
                    v.y = alpha * r[1] + beta * v.y;
                    v.z = alpha * r[2] + beta * v.z;
                    v.w = alpha * r[3] + beta * v.w;
                    *out = v;
                }
            }
        }
    }
}

// 10: warptiling, BM = BN = 128, BK = 16, a warp 64 x 64 (WNITER = 4 sub-tiles along N, so
// WMITER = 1), TM = 8, TN = 4, 128 threads. Grid (N / 128, M / 128), block 128.
extern "C" __global__ void __launch_bounds__(128)
    sgemm_warptiled(int M, int N, int K, float alpha, const float *A, const float *B,
                    float beta, float *C) {
    constexpr int BM = 128, BN = 128, BK = 16, WM = 64, WN = 64, WNITER = 4, TM = 8, TN = 4;
    constexpr int THREADS = 128;
    constexpr int WMITER = WM * WN / (32 * TM * TN * WNITER);
    constexpr int SUBN = WN / WNITER;
    __shared__ float sA[BK * BM];
    __shared__ float sB[BK * BN];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wcol = warp % (BN / WN), wrow = warp / (BN / WN);
    const int lcol = lane % (SUBN / TN), lrow = lane / (SUBN / TN);
    const float *a = A + blockIdx.y * BM * K;
    const float *b = B + blockIdx.x * BN;
    float acc[WMITER * TM * WNITER * TN] = {0.0f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_slice<BM, BN, BK, THREADS>(N, K, a + k0, b + k0 * N, sA, sB, threadIdx.x);
        __syncthreads();
        warp_tile_step<BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN>(sA, sB, acc, wrow, wcol, lrow,
                                                                   lcol);
        __syncthreads();
    }
    store_warp_tile<BM, BN, WM, WN, WMITER, WNITER, TM, TN>(N, alpha, beta, C, acc, wrow, wcol,
                                                            lrow, lcol);
}

// 11: double buffering with two halves of the block: two slices of A and B in shared memory;
// while one half of the threads computes on one buffer, the other half loads the next slice
// into the other, then each half computes on the buffer the other loaded. BM = 128, BN = 256,
// BK = 16, a warp 128 x 32 (WNITER = 1, so WMITER = 2), TM = TN = 8, 256 threads.
// Grid (N / 256, M / 128), block 256.
extern "C" __global__ void __launch_bounds__(256)
    sgemm_double_buffered(int M, int N, int K, float alpha, const float *A, const float *B,
                          float beta, float *C) {
    constexpr int BM = 128, BN = 256, BK = 16, WM = 128, WN = 32, WNITER = 1, TM = 8, TN = 8;
    constexpr int THREADS = 256, HALF = THREADS / 2;
    constexpr int WMITER = WM * WN / (32 * TM * TN * WNITER);
    constexpr int SUBN = WN / WNITER;
    __shared__ float sA[2][BK * BM];
    __shared__ float sB[2][BK * BN];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wcol = warp % (BN / WN), wrow = warp / (BN / WN);
    const int lcol = lane % (SUBN / TN), lrow = lane / (SUBN / TN);
    const bool second = threadIdx.x >= HALF;
    const int t = threadIdx.x % HALF;
    const float *a = A + blockIdx.y * BM * K;
    const float *b = B + blockIdx.x * BN;
    float acc[WMITER * TM * WNITER * TN] = {0.0f};
    auto step = [&](int buffer) {
        warp_tile_step<BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN>(sA[buffer], sB[buffer], acc,
                                                                   wrow, wcol, lrow, lcol);
    };
    auto load = [&](int k0, int buffer) {
        load_slice<BM, BN, BK, HALF>(N, K, a + k0, b + k0 * N, sA[buffer], sB[buffer], t);
    };
    if (!second) {
        load(0, 0);
    }
    __syncthreads();
    // Three phases per pair of slices, a barrier after each: the first half computes on buffer
    // 0 while the second loads the next slice into 1; then the first computes on 1 and the
    // second on 0; then the first loads the slice after into 0 while the second computes on 1.
    for (int k0 = 0; k0 < K; k0 += 2 * BK) {
        const bool has_next = k0 + BK < K;
        if (!second) {
            step(0);
        } else if (has_next) {
            load(k0 + BK, 1);
        }
        __syncthreads();
        if (second) {
            step(0);
        } else if (has_next) {
            step(1);
        }
        __syncthreads();
        if (second) {
            if (has_next) {
                step(1);
            }
        } else if (k0 + 2 * BK < K) {
            load(k0 + 2 * BK, 0);
        }
        __syncthreads();
    }
    store_warp_tile<BM, BN, WM, WN, WMITER, WNITER, TM, TN>(N, alpha, beta, C, acc, wrow, wcol,
                                                            lrow, lcol);
}
