// Cooperative groups and printf, as real CUDA code uses them: a block's tiles of 32 reducing
// with cg::reduce, a block-wide sync through the group, and a device-side printf whose return
// value (the number of arguments it printed) is kept. Under -G, cooperative groups reads the
// driver's reserved shared memory (%reserved_smem_offset_1) and synchronises through a
// __barrier_sync(id) helper; printf is a call of vprintf in every build.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

// out[blockIdx.x] = the sum of the block's inputs: each warp's tile reduces with cg::reduce,
// lane 0 of each tile adds its sum into a shared total after the block's sync.
extern "C" __global__ void tile_sums(float* out, const float* in, int n) {
    __shared__ float total;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    if (block.thread_rank() == 0) total = 0.0f;
    block.sync();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    float s = cg::reduce(tile, v, cg::plus<float>());
    if (tile.thread_rank() == 0) atomicAdd(&total, s);
    block.sync();
    if (block.thread_rank() == 0) out[blockIdx.x] = total;
}

// Threads below `shown` print one line each; every thread stores what printf returned (0 for
// those that did not print).
extern "C" __global__ void say(int* printed, int shown, float x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int n = 0;
    if (i < shown) n = printf("thread %d: %5.2f %e %g|%-4d|%04x|%s|%c\n", i, x, x * 1000.0f, x, i, i * 255, "ok", 'A' + i);
    printed[i] = n;
}

