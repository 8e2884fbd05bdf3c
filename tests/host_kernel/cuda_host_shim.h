// Lets kernels/*.cu compile as plain C++ so CI (no GPU) runs the real kernel source: CUDA keywords
// become nothing, and the launch grid is emulated by the harness setting blockIdx/threadIdx.
#pragma once
#include <algorithm>
#include <cmath>

#define VCLIP_HOST_SHIM 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 { unsigned x = 0, y = 0, z = 0; };
inline dim3 blockIdx, threadIdx, blockDim, gridDim;

using std::min;
using std::max;

// Unsigned 4-way byte dot product with accumulate, as the __dp4a intrinsic.
inline unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
    for (int k = 0; k < 4; ++k) c += ((a >> (8 * k)) & 0xFFu) * ((b >> (8 * k)) & 0xFFu);
    return c;
}

inline unsigned int vclip_float_bits(float v) {
    unsigned int bits;
    __builtin_memcpy(&bits, &v, sizeof bits);
    return bits;
}

// One thread runs at a time: a warp's sum is each thread's own value, and every thread adds it.
inline unsigned long long vclip_warp_sum(unsigned long long v) { return v; }
inline bool vclip_lane_leads() { return true; }
template <typename T>
inline T atomicAdd(T* address, T v) {
    T old = *address;
    *address = old + v;
    return old;
}

inline float __uint_as_float(unsigned int bits) {
    float v;
    __builtin_memcpy(&v, &bits, sizeof v);
    return v;
}

inline unsigned short vclip_f32_to_f16_bits(float v) {
    _Float16 h = (_Float16)v;  // round to nearest even, as cvt.rn.f16.f32
    unsigned short bits;
    __builtin_memcpy(&bits, &h, sizeof bits);
    return bits;
}
