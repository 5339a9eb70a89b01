// Reverses each block's slice of an array through shared memory: the example of
// docs/own-kernels.md. Thread t writes element t of the tile, then reads element
// blockDim.x - 1 - t, which another thread wrote (in another warp, for most t).

// The bug: nothing makes thread t wait until the thread that writes its element has written it.
extern "C" __global__ void reverse_unsynced(float *out, const float *in)
{
    __shared__ float tile[256];
    const unsigned t = threadIdx.x;
    const unsigned first = blockIdx.x * blockDim.x;
    tile[t] = in[first + t];
    out[first + t] = tile[blockDim.x - 1 - t];
}

// The fix: a barrier between the writes and the reads.
extern "C" __global__ void reverse(float *out, const float *in)
{
    __shared__ float tile[256];
    const unsigned t = threadIdx.x;
    const unsigned first = blockIdx.x * blockDim.x;
    tile[t] = in[first + t];
    __syncthreads();
    out[first + t] = tile[blockDim.x - 1 - t];
}
