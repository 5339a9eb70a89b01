// The copy kernel of "How Data Type Width Affects GPU Memory Throughput" (yencal.github.io,
// 2025-11-29; repository yencal/gpu-bandwidth-benchmark), written here from the post's
// description for `cargo xtask validate` (perf::validation): a grid-stride copy of a byte buffer
// that moves it as elements of 1, 2, 4, 8 or 16 bytes (the last as uint4), the bytes past a whole
// number of wide elements one at a time. The launch has one thread per wide element (blocks of
// 1024 threads), so each thread copies one element.
//
// Every entry takes (dst, src, n): n bytes from src to dst.

template <typename V>
__device__ void copy_as(unsigned char *dst, const unsigned char *src, unsigned long long n) {
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    const unsigned long long wide = n / sizeof(V);
    V *d = reinterpret_cast<V *>(dst);
    const V *s = reinterpret_cast<const V *>(src);
    for (unsigned long long i = first; i < wide; i += stride) {
        d[i] = s[i];
    }
    for (unsigned long long i = wide * sizeof(V) + first; i < n; i += stride) {
        dst[i] = src[i];
    }
}

extern "C" __global__ void memcpy_u8(unsigned char *dst, const unsigned char *src,
                                     unsigned long long n) {
    copy_as<unsigned char>(dst, src, n);
}

extern "C" __global__ void memcpy_u16(unsigned char *dst, const unsigned char *src,
                                      unsigned long long n) {
    copy_as<unsigned short>(dst, src, n);
}

extern "C" __global__ void memcpy_u32(unsigned char *dst, const unsigned char *src,
                                      unsigned long long n) {
    copy_as<unsigned int>(dst, src, n);
}

extern "C" __global__ void memcpy_u64(unsigned char *dst, const unsigned char *src,
                                      unsigned long long n) {
    copy_as<unsigned long long>(dst, src, n);
}

extern "C" __global__ void memcpy_u128(unsigned char *dst, const unsigned char *src,
                                       unsigned long long n) {
    copy_as<uint4>(dst, src, n);
}
