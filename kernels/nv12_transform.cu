// vclip: one pass from a decoded NV12 (8-bit) or P016 (10/12-bit, MSB-aligned) surface to the final
// training tensor: resample (area average when shrinking, bilinear otherwise), crop, horizontal flip,
// YUV->RGB with the stream's matrix and range, per-channel scale/bias (normalize), dtype and layout.
// Each thread writes the three channels of one output pixel; no intermediate image exists.
//
// The NumPy twin in vclip/_reference.py is the reference: chroma is treated as repeated over its 2x2
// luma block, every plane is resampled with the same weights, RGB is clamped to [0, 1], then
// out = rgb * scale + bias (uint8 rounds half up).
//
// Built by CuPy (NVRTC) on the GPU, and by the host C++ compiler with tests/cuda_host_shim.h in CI.

struct TransformParams {
    int output_width, output_height;
    int antialias;
    int pad0;
    long long stride_c, stride_y, stride_x;  // output strides in elements
    float scale[3], bias[3];
};

struct FrameJob {
    unsigned long long luma, chroma;  // device addresses of the Y plane and the interleaved UV plane
    unsigned long long output;        // address of element (c=0, y=0, x=0) of this frame's output
    int luma_pitch, chroma_pitch;     // bytes per row
    int source_width, source_height;
    int resized_width, resized_height;
    int crop_x, crop_y;
    int flip, bit_shift;              // bit_shift: 16 - bit depth for P016, 0 for NV12
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

__device__ __forceinline__ float tap_weight(const Taps& t, int k) {
    if (t.area) {
        float i = (float)(t.first + k);
        return (fminf(t.high, i + 1.0f) - fmaxf(t.low, i)) * t.inverse_width;
    }
    if (t.count == 1) return 1.0f;
    return k == 0 ? 1.0f - t.fraction : t.fraction;
}

template <typename In>
__device__ __forceinline__ float load(const unsigned char* row, int index, int shift) {
    return (float)(((const In*)row)[index] >> shift);
}

template <typename In, typename Out>
__device__ __forceinline__ void transform_pixel(const TransformParams& p, const FrameJob& job, int ox, int oy) {
    int rx = job.crop_x + (job.flip ? p.output_width - 1 - ox : ox);
    int ry = job.crop_y + oy;
    Taps lx = luma_taps(rx, job.source_width, job.resized_width, p.antialias);
    Taps ly = luma_taps(ry, job.source_height, job.resized_height, p.antialias);
    Taps cx = chroma_taps(lx);
    Taps cy = chroma_taps(ly);

    const unsigned char* luma = (const unsigned char*)job.luma;
    const unsigned char* chroma = (const unsigned char*)job.chroma;
    float y = 0.0f;
    for (int j = 0; j < ly.count; ++j) {
        const unsigned char* row = luma + (long long)tap_index(ly, j) * job.luma_pitch;
        float row_sum = 0.0f;
        for (int i = 0; i < lx.count; ++i) row_sum += tap_weight(lx, i) * load<In>(row, tap_index(lx, i), job.bit_shift);
        y += tap_weight(ly, j) * row_sum;
    }
    float u = 0.0f, v = 0.0f;
    for (int j = 0; j < cy.count; ++j) {
        const unsigned char* row = chroma + (long long)tap_index(cy, j) * job.chroma_pitch;
        float row_u = 0.0f, row_v = 0.0f;
        for (int i = 0; i < cx.count; ++i) {
            float w = tap_weight(cx, i);
            int column = 2 * tap_index(cx, i);
            row_u += w * load<In>(row, column, job.bit_shift);
            row_v += w * load<In>(row, column + 1, job.bit_shift);
        }
        u += tap_weight(cy, j) * row_u;
        v += tap_weight(cy, j) * row_v;
    }

    const float* c = job.color;
    float luma_value = (y - c[0]) * c[1];
    float cb = (u - c[2]) * c[3];
    float cr = (v - c[2]) * c[3];
    float rgb[3] = {
        luma_value + c[4] * cr,
        luma_value + c[5] * cb + c[6] * cr,
        luma_value + c[7] * cb,
    };
    Out* out = (Out*)job.output + (long long)oy * p.stride_y + (long long)ox * p.stride_x;
    for (int k = 0; k < 3; ++k) {
        float value = fminf(fmaxf(rgb[k], 0.0f), 1.0f);
        store(out + k * p.stride_c, value * p.scale[k] + p.bias[k]);
    }
}

// One frame per launch: the job travels by value (no host-to-device copy).
template <typename In, typename Out>
__global__ void transform_frame(TransformParams p, FrameJob job) {
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox < p.output_width && oy < p.output_height) transform_pixel<In, Out>(p, job, ox, oy);
}

// Many frames per launch: blockIdx.z picks the job.
template <typename In, typename Out>
__global__ void transform_frames(TransformParams p, const FrameJob* jobs) {
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox < p.output_width && oy < p.output_height) transform_pixel<In, Out>(p, jobs[blockIdx.z], ox, oy);
}
