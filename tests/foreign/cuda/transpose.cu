// out (cols x rows) = in (rows x cols), the project's `transpose_padded` entry: (in, out, rows,
// cols), blocks of 32 x 8 threads, one 32 x 32 tile per block through a padded shared tile declared
// inside the kernel (NVVM makes it a function-scope .shared variable).
#define TILE 32
#define BLOCK_ROWS 8

extern "C" __global__ void transpose_padded(const float *in, float *out, unsigned rows, unsigned cols) {
    __shared__ float tile[TILE][TILE + 1];
    unsigned x = blockIdx.x * TILE + threadIdx.x;
    unsigned y = blockIdx.y * TILE + threadIdx.y;
    for (unsigned j = 0; j < TILE; j += BLOCK_ROWS) {
        if (x < cols && y + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
        }
    }
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (unsigned j = 0; j < TILE; j += BLOCK_ROWS) {
        if (x < rows && y + j < cols) {
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
