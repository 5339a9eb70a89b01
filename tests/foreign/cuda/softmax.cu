// The naive softmax's three passes with the project's entries (`softmax_row_max_f32`,
// `softmax_row_sum_exp_f32`, `softmax_normalise_f32`): one block of 256 threads per row, a
// shared-memory tree reduction, the row's statistics read by thread 0 and broadcast through shared
// memory (so that the bytes moved are the project's cost model's).
#define THREADS 256

__device__ float block_reduce(float v, bool is_max) {
    __shared__ float partial[THREADS];
    partial[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) {
            float o = partial[threadIdx.x + s];
            partial[threadIdx.x] = is_max ? fmaxf(partial[threadIdx.x], o) : partial[threadIdx.x] + o;
        }
        __syncthreads();
    }
    return partial[0];
}

__device__ float broadcast(const float *p) {
    __shared__ float value;
    if (threadIdx.x == 0) {
        value = *p;
    }
    __syncthreads();
    return value;
}

extern "C" __global__ void softmax_row_max_f32(const float *x, float *row_max, unsigned cols) {
    const float *row = x + (size_t)blockIdx.x * cols;
    float m = -__int_as_float(0x7f800000);
    for (unsigned j = threadIdx.x; j < cols; j += THREADS) {
        m = fmaxf(m, row[j]);
    }
    m = block_reduce(m, true);
    if (threadIdx.x == 0) {
        row_max[blockIdx.x] = m;
    }
}

extern "C" __global__ void softmax_row_sum_exp_f32(const float *x, const float *row_max, float *row_sum, unsigned cols) {
    const float *row = x + (size_t)blockIdx.x * cols;
    float m = broadcast(row_max + blockIdx.x);
    float l = 0.0f;
    for (unsigned j = threadIdx.x; j < cols; j += THREADS) {
        l += expf(row[j] - m);
    }
    l = block_reduce(l, false);
    if (threadIdx.x == 0) {
        row_sum[blockIdx.x] = l;
    }
}

extern "C" __global__ void softmax_normalise_f32(const float *x, const float *row_max, const float *row_sum, float *y, unsigned cols) {
    size_t start = (size_t)blockIdx.x * cols;
    float m = broadcast(row_max + blockIdx.x);
    __syncthreads();
    float l = broadcast(row_sum + blockIdx.x);
    for (unsigned j = threadIdx.x; j < cols; j += THREADS) {
        y[start + j] = expf(x[start + j] - m) / l;
    }
}
