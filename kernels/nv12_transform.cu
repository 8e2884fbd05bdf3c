// vclip: one pass from a decoded NV12 (8-bit) or P016 (10/12-bit, MSB-aligned) surface to the final
// training tensor: display orientation (turns by 90 degrees, mirrors), resample (area average when
// shrinking, bilinear otherwise), crop, horizontal flip, YUV->RGB with the stream's matrix and range,
// per-channel scale/bias (normalize), dtype and layout.
// No intermediate image exists: each thread reads the samples under its output pixels and writes them.
//
// The NumPy twin in vclip/_engine/reference.py is the reference: chroma is treated as repeated over its 2x2
// luma block, every plane is resampled with the same weights, RGB is clamped to [0, 1], then
// out = rgb * scale + bias (uint8 rounds half up).
//
// Orientation is a coordinate map, not a pass: an output pixel's place in the displayed (turned)
// resized picture is mapped to the stored resized picture (swap axes when transpose, mirror each
// stored axis when asked), and the taps are taken there.
//
// Two code paths with the same arithmetic: at native scale (resized size == source size) without
// transpose a thread converts 4 neighbouring pixels with vector loads and stores
// (pixels_per_thread == 4); otherwise a thread resamples one pixel (pixels_per_thread == 1).
//
// Built by CuPy (NVRTC) on the GPU, and by the host C++ compiler with tests/host_kernel/cuda_host_shim.h
// in CI.

struct TransformParams {
    int output_width, output_height;
    int antialias;
    int pixels_per_thread;                   // 4: native-scale path, 1: resampling path
    long long stride_c, stride_y, stride_x;  // output strides in elements
    float scale[3], bias[3];
};

struct FrameJob {
    unsigned long long luma, chroma;  // device addresses of the Y plane and the interleaved UV plane
    unsigned long long output;        // address of element (c=0, y=0, x=0) of this frame's output
    int luma_pitch, chroma_pitch;     // bytes per row
    int source_width, source_height;
    int resized_width, resized_height;  // before the turn (stored orientation)
    int crop_x, crop_y;                 // in the displayed resized picture
    int flip, bit_shift;              // bit_shift: 16 - bit depth for P016, 0 for NV12
    int transpose, mirror_x, mirror_y;  // display orientation (see vclip.transforms.Orientation)
    float color[8];                   // y_offset, y_scale, c_offset, c_scale, r_cr, g_cb, g_cr, b_cb
};

#ifndef VCLIP_HOST_SHIM
__device__ __forceinline__ unsigned short vclip_f32_to_f16_bits(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
#endif

struct Float16Bits { unsigned short bits; };

__device__ __forceinline__ void store(unsigned char* p, float v) { *p = (unsigned char)(v + 0.5f); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(Float16Bits* p, float v) { p->bits = vclip_f32_to_f16_bits(v); }

__device__ __forceinline__ bool aligned(const void* p, unsigned long long bytes) {
    return ((unsigned long long)p & (bytes - 1)) == 0;
}

// -- colour ----------------------------------------------------------------------------------------
__device__ __forceinline__ void yuv_to_rgb(const float* c, float y, float u, float v, float* rgb) {
    float luma = (y - c[0]) * c[1];
    float cb = (u - c[2]) * c[3];
    float cr = (v - c[2]) * c[3];
    rgb[0] = fminf(fmaxf(luma + c[4] * cr, 0.0f), 1.0f);
    rgb[1] = fminf(fmaxf(luma + c[5] * cb + c[6] * cr, 0.0f), 1.0f);
    rgb[2] = fminf(fmaxf(luma + c[7] * cb, 0.0f), 1.0f);
}

template <typename Out>
__device__ __forceinline__ void store_pixel(const TransformParams& p, Out* out, const float* rgb) {
    for (int k = 0; k < 3; ++k) store(out + k * p.stride_c, rgb[k] * p.scale[k] + p.bias[k]);
}

// -- resampling path -------------------------------------------------------------------------------
// Sample positions and weights along one axis for one output coordinate. Sample k is at
// (first + k) >> shift; shift is 1 when bilinear chroma reads the chroma under each luma sample.
struct Taps {
    int first, count, shift, area;
    float low, high, inverse_width;  // area: source interval [low, high) and 1 / its width
    float fraction;                  // bilinear: weight of the second sample
};

__device__ __forceinline__ Taps luma_taps(int coordinate, int source, int resized, int antialias) {
    Taps t;
    float scale = (float)source / (float)resized;
    t.shift = 0;
    t.area = antialias && scale > 1.0f;
    if (t.area) {
        t.low = coordinate * scale;
        t.high = fminf(t.low + scale, (float)source);
        t.inverse_width = 1.0f / scale;
        t.first = (int)floorf(t.low);
        t.count = min((int)ceilf(t.high), source) - t.first;
        t.fraction = 0.0f;
    } else {
        float position = fminf(fmaxf((coordinate + 0.5f) * scale - 0.5f, 0.0f), (float)(source - 1));
        t.first = (int)floorf(position);
        t.fraction = position - t.first;
        t.count = (t.fraction > 0.0f && t.first + 1 < source) ? 2 : 1;
        t.low = t.high = t.inverse_width = 0.0f;
    }
    return t;
}

// Chroma taps for the same output coordinate: the luma footprint in chroma units (area), or the
// chroma sample under each luma sample with the luma weights (bilinear).
__device__ __forceinline__ Taps chroma_taps(const Taps& luma) {
    Taps t = luma;
    if (luma.area) {
        t.low = luma.low * 0.5f;
        t.high = luma.high * 0.5f;
        t.inverse_width = luma.inverse_width * 2.0f;
        t.first = (int)floorf(t.low);
        t.count = (int)ceilf(t.high) - t.first;
    } else {
        t.shift = 1;
    }
    return t;
}

__device__ __forceinline__ int tap_index(const Taps& t, int k) { return (t.first + k) >> t.shift; }

// Weight of sample k: for area, the covered part of the sample's unit interval over the box width.
__device__ __forceinline__ float tap_weight(const Taps& t, int k) {
    if (t.area) {
        float i = (float)(t.first + k);
        return (fminf(t.high, i + 1.0f) - fmaxf(t.low, i)) * t.inverse_width;
    }
    if (t.count == 1) return 1.0f;
    return k == 0 ? 1.0f - t.fraction : t.fraction;
}

// Unweighted sums, per channel, of the samples begin..end-1 of a row with C interleaved channels
// (1: Y, 2: UV). 8-bit rows that are 4-byte aligned are read a word at a time, bytes summed with dp4a.
template <typename In, int C>
__device__ __forceinline__ void interior_sums(const In* row, int begin, int end, int shift, int* sums) {
    if (sizeof(In) == 1 && aligned(row, 4)) {
        const unsigned char* bytes = (const unsigned char*)row;
        const unsigned int lanes[2] = {C == 1 ? 0x01010101u : 0x00010001u, 0x01000100u};  // bytes of channel 0, 1
        int low = begin * C, high = end * C;
        unsigned int total[C];
        for (int c = 0; c < C; ++c) total[c] = 0;
        for (int word_start = low & ~3; word_start < high; word_start += 4) {
            unsigned int word = *(const unsigned int*)(bytes + word_start);
            int keep_from = max(low - word_start, 0), keep_to = min(high - word_start, 4);
            word &= (unsigned int)(((1ull << (8 * keep_to)) - 1) & ~((1ull << (8 * keep_from)) - 1));
            for (int c = 0; c < C; ++c) total[c] = __dp4a(word, lanes[c], total[c]);
        }
        for (int c = 0; c < C; ++c) sums[c] = (int)total[c];
        return;
    }
    for (int c = 0; c < C; ++c) {
        sums[c] = 0;
        for (int k = begin; k < end; ++k) sums[c] += row[k * C + c] >> shift;
    }
}

// Weighted sum along one row of a plane with C interleaved channels (1: Y, 2: UV). Area rows sum
// their interior samples unweighted and weight only the two partly covered edge samples.
template <typename In, int C>
__device__ __forceinline__ void row_sum(const In* row, const Taps& t, int shift, float* sum) {
    if (t.area) {
        int last = t.count - 1;
        float first_weight = fminf(t.high, t.first + 1.0f) - t.low;
        float last_weight = t.high - (float)(t.first + last);
        int interiors[C];
        interior_sums<In, C>(row, t.first + 1, t.first + last, shift, interiors);
        for (int c = 0; c < C; ++c) {
            int interior = interiors[c];
            float edges = first_weight * (float)(row[t.first * C + c] >> shift);
            if (last > 0) edges += last_weight * (float)(row[(t.first + last) * C + c] >> shift);
            sum[c] = ((float)interior + edges) * t.inverse_width;
        }
    } else {
        for (int c = 0; c < C; ++c) {
            sum[c] = 0.0f;
            for (int k = 0; k < t.count; ++k) sum[c] += tap_weight(t, k) * (float)(row[tap_index(t, k) * C + c] >> shift);
        }
    }
}

template <typename In, int C>
__device__ __forceinline__ void resample(const unsigned char* plane, int pitch, const Taps& x, const Taps& y,
                                         int shift, float* value) {
    for (int c = 0; c < C; ++c) value[c] = 0.0f;
    for (int j = 0; j < y.count; ++j) {
        float row[C];
        row_sum<In, C>((const In*)(plane + (long long)tap_index(y, j) * pitch), x, shift, row);
        float w = tap_weight(y, j);
        for (int c = 0; c < C; ++c) value[c] += w * row[c];
    }
}

template <typename In, typename Out>
__device__ __forceinline__ void transform_pixel(const TransformParams& p, const FrameJob& job, int ox, int oy) {
    int dx = job.crop_x + (job.flip ? p.output_width - 1 - ox : ox);  // displayed resized picture
    int dy = job.crop_y + oy;
    int rx = job.transpose ? dy : dx, ry = job.transpose ? dx : dy;    // stored resized picture
    if (job.mirror_x) rx = job.resized_width - 1 - rx;
    if (job.mirror_y) ry = job.resized_height - 1 - ry;
    Taps lx = luma_taps(rx, job.source_width, job.resized_width, p.antialias);
    Taps ly = luma_taps(ry, job.source_height, job.resized_height, p.antialias);
    float y, uv[2], rgb[3];
    resample<In, 1>((const unsigned char*)job.luma, job.luma_pitch, lx, ly, job.bit_shift, &y);
    resample<In, 2>((const unsigned char*)job.chroma, job.chroma_pitch, chroma_taps(lx), chroma_taps(ly), job.bit_shift, uv);
    yuv_to_rgb(job.color, y, uv[0], uv[1], rgb);
    store_pixel(p, (Out*)job.output + (long long)oy * p.stride_y + (long long)ox * p.stride_x, rgb);
}

// -- native-scale path: 4 pixels per thread --------------------------------------------------------
struct alignas(16) Float4 { float v[4]; };

// 4 consecutive samples starting at row[index], one vector load when aligned.
template <typename In>
__device__ __forceinline__ void load4(const In* row, int index, int shift, float* out) {
    const In* p = row + index;
    if (sizeof(In) == 1 && aligned(p, 4)) {
        unsigned int word = *(const unsigned int*)p;
        for (int k = 0; k < 4; ++k) out[k] = (float)((word >> (8 * k)) & 0xFFu);
    } else if (sizeof(In) == 2 && aligned(p, 8)) {
        unsigned long long word = *(const unsigned long long*)p;
        for (int k = 0; k < 4; ++k) out[k] = (float)(((word >> (16 * k)) & 0xFFFFu) >> shift);
    } else {
        for (int k = 0; k < 4; ++k) out[k] = (float)(p[k] >> shift);
    }
}

template <typename Out>
__device__ __forceinline__ void store4(Out* out, long long stride, const float* values) {
    for (int k = 0; k < 4; ++k) store(out + k * stride, values[k]);
}

// Four consecutive unit-stride values (planar layouts) with one vector store when aligned.
__device__ __forceinline__ void store4_contiguous(unsigned char* out, const float* values) {
    if (aligned(out, 4)) {
        unsigned int word = 0;
        for (int k = 0; k < 4; ++k) word |= (unsigned int)(unsigned char)(values[k] + 0.5f) << (8 * k);
        *(unsigned int*)out = word;
    } else {
        store4(out, 1, values);
    }
}
__device__ __forceinline__ void store4_contiguous(float* out, const float* values) {
    if (aligned(out, 16)) {
        Float4 word;
        for (int k = 0; k < 4; ++k) word.v[k] = values[k];
        *(Float4*)out = word;
    } else {
        store4(out, 1, values);
    }
}
__device__ __forceinline__ void store4_contiguous(Float16Bits* out, const float* values) {
    if (aligned(out, 8)) {
        unsigned long long word = 0;
        for (int k = 0; k < 4; ++k) word |= (unsigned long long)vclip_f32_to_f16_bits(values[k]) << (16 * k);
        *(unsigned long long*)out = word;
    } else {
        store4(out, 1, values);
    }
}

// Twelve consecutive values r0 g0 b0 r1 ... b3 (channel-last layouts) with vector stores when aligned.
__device__ __forceinline__ bool store12_interleaved(unsigned char* out, const float (*values)[4]) {
    if (!aligned(out, 4)) return false;
    for (int w = 0; w < 3; ++w) {
        unsigned int word = 0;
        for (int b = 0; b < 4; ++b) {
            int i = 4 * w + b;
            word |= (unsigned int)(unsigned char)(values[i % 3][i / 3] + 0.5f) << (8 * b);
        }
        ((unsigned int*)out)[w] = word;
    }
    return true;
}
__device__ __forceinline__ bool store12_interleaved(float* out, const float (*values)[4]) {
    if (!aligned(out, 16)) return false;
    for (int w = 0; w < 3; ++w) {
        Float4 word;
        for (int b = 0; b < 4; ++b) word.v[b] = values[(4 * w + b) % 3][(4 * w + b) / 3];
        ((Float4*)out)[w] = word;
    }
    return true;
}
__device__ __forceinline__ bool store12_interleaved(Float16Bits* out, const float (*values)[4]) {
    if (!aligned(out, 8)) return false;
    for (int w = 0; w < 3; ++w) {
        unsigned long long word = 0;
        for (int b = 0; b < 4; ++b) {
            int i = 4 * w + b;
            word |= (unsigned long long)vclip_f32_to_f16_bits(values[i % 3][i / 3]) << (16 * b);
        }
        ((unsigned long long*)out)[w] = word;
    }
    return true;
}

template <typename In, typename Out>
__device__ __forceinline__ void transform_native4(const TransformParams& p, const FrameJob& job, int x0, int oy) {
    // Output pixels x0..x0+3 come from 4 consecutive source columns starting at `first`, in
    // reverse order when exactly one of the flip and the orientation's mirror applies.
    int displayed = job.crop_x + (job.flip ? p.output_width - 4 - x0 : x0);
    int first = job.mirror_x ? job.source_width - 4 - displayed : displayed;
    int reverse = job.flip ^ job.mirror_x;
    int row = job.mirror_y ? job.source_height - 1 - (job.crop_y + oy) : job.crop_y + oy;
    float y[4], uv[4], u[4], v[4];
    load4<In>((const In*)((const unsigned char*)job.luma + (long long)row * job.luma_pitch), first, job.bit_shift, y);
    const In* chroma_row = (const In*)((const unsigned char*)job.chroma + (long long)(row >> 1) * job.chroma_pitch);
    if ((first & 1) == 0) {
        load4<In>(chroma_row, first, job.bit_shift, uv);  // two UV pairs cover the four columns
        for (int k = 0; k < 4; ++k) { u[k] = uv[(k >> 1) * 2]; v[k] = uv[(k >> 1) * 2 + 1]; }
    } else {
        for (int k = 0; k < 4; ++k) {
            int pair = (first + k) >> 1;
            u[k] = (float)(chroma_row[2 * pair] >> job.bit_shift);
            v[k] = (float)(chroma_row[2 * pair + 1] >> job.bit_shift);
        }
    }
    float values[3][4];
    for (int k = 0; k < 4; ++k) {
        int source = reverse ? 3 - k : k;
        float rgb[3];
        yuv_to_rgb(job.color, y[source], u[source], v[source], rgb);
        for (int c = 0; c < 3; ++c) values[c][k] = rgb[c] * p.scale[c] + p.bias[c];
    }
    Out* out = (Out*)job.output + (long long)oy * p.stride_y + (long long)x0 * p.stride_x;
    if (p.stride_c == 1 && p.stride_x == 3 && store12_interleaved(out, values)) return;
    for (int c = 0; c < 3; ++c) {
        if (p.stride_x == 1) store4_contiguous(out + c * p.stride_c, values[c]);
        else store4(out + c * p.stride_c, p.stride_x, values[c]);
    }
}

template <typename In, typename Out>
__device__ __forceinline__ void transform_thread(const TransformParams& p, const FrameJob& job) {
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * p.pixels_per_thread;
    if (oy >= p.output_height || x0 >= p.output_width) return;
    if (p.pixels_per_thread == 4 && x0 + 4 <= p.output_width) {
        transform_native4<In, Out>(p, job, x0, oy);
        return;
    }
    for (int ox = x0; ox < min(x0 + p.pixels_per_thread, p.output_width); ++ox) transform_pixel<In, Out>(p, job, ox, oy);
}

// Launched with VCLIP_BLOCK_THREADS threads per block (BLOCK in vclip/_engine/kernel_args.py). At most 32
// registers per thread, so that 8 blocks (2048 threads) fit on an SM: latency, not arithmetic,
// limits this kernel, and on an H200 the 64 registers the compiler took otherwise cost 10-40%.
#define VCLIP_BLOCK_THREADS 256
#define VCLIP_BLOCKS_PER_SM 8

// One frame per launch: the job travels by value (no host-to-device copy). One kernel per pair of
// sample type (NV12: unsigned char, P016: unsigned short) and output type, with C names: CuPy keeps
// a module compiled from plain names in its on-disk cache, and compiles it again in every process
// when it must look up template instantiations by name.
#define VCLIP_TRANSFORM_KERNEL(name, In, Out)                                                     \
    extern "C" __global__ void __launch_bounds__(VCLIP_BLOCK_THREADS, VCLIP_BLOCKS_PER_SM)        \
        name(TransformParams p, FrameJob job) {                                                     \
        transform_thread<In, Out>(p, job);                                                          \
    }
VCLIP_TRANSFORM_KERNEL(vclip_transform_nv12_uint8, unsigned char, unsigned char)
VCLIP_TRANSFORM_KERNEL(vclip_transform_nv12_float16, unsigned char, Float16Bits)
VCLIP_TRANSFORM_KERNEL(vclip_transform_nv12_float32, unsigned char, float)
VCLIP_TRANSFORM_KERNEL(vclip_transform_p016_uint8, unsigned short, unsigned char)
VCLIP_TRANSFORM_KERNEL(vclip_transform_p016_float16, unsigned short, Float16Bits)
VCLIP_TRANSFORM_KERNEL(vclip_transform_p016_float32, unsigned short, float)

