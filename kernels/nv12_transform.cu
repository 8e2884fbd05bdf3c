// vclip: one pass from a decoded NV12 (8-bit) or P016 (10/12-bit, MSB-aligned) surface to the final
// training tensor: display orientation (turns by 90 degrees, mirrors), a source window resampled to
// the output (area average or triangle filter when shrinking, bilinear otherwise: resize, crop,
// random resized and multi-scale crops alike), horizontal flip, YUV->RGB with the stream's matrix
// and range, colour adjustments (brightness, contrast, saturation, hue in any order, grayscale),
// per-channel scale/bias (normalize), dtype and layout.
// No intermediate image exists: each thread reads the samples under its output pixels and writes them.
//
// The NumPy twin in vclip/_engine/reference.py is the reference: chroma is treated as repeated over
// its 2x2 luma block, every plane is resampled with the same weights, RGB is clamped to [0, 1], the
// colour adjustments apply as torchvision's float functions do, then out = rgb * scale + bias
// (uint8 rounds half up, bfloat16 rounds to nearest even).
//
// Geometry is a coordinate map, not a pass: along each stored axis of the source, output sample k
// (counted backwards when the axis is reversed by a mirror or the flip) covers the source interval
// [origin + k*step, origin + (k+1)*step); the orientation's transpose swaps which output axis runs
// along which stored axis. Taps are read only inside [low, high) of each axis (the whole source,
// or the window of a crop taken before the resize).
//
// Contrast blends each pixel with the mean grayscale of its whole output frame: with a contrast
// change, the grayscale-sum kernel first adds up the grayscale of the frame at that point of the adjustments
// (into FrameJob.gray_sum), and the transform kernel reads the mean from there (same stream, in order).
// The sum is of fixed-point values (2^-24 units) in a 64-bit integer, so that its order does not
// change it: the same frame gives the same bits on every run.
//
// Two code paths with the same arithmetic: at native scale (window == output, no resize) without
// transpose a thread converts 4 neighbouring pixels with vector loads and stores
// (pixels_per_thread == 4); otherwise a thread resamples one pixel (pixels_per_thread == 1).
// The training extensions, colour adjustments and the triangle filter, are compiled only into the
// kernels with Extended == true, so that the plain kernels stay as small as they were.
//
// Built by CuPy (NVRTC) on the GPU, and by the host C++ compiler with tests/host_kernel/cuda_host_shim.h
// in CI.

struct TransformParams {
    int output_width, output_height;
    int filter;                              // shrinking: 0 bilinear (aliases), 1 area average, 2 triangle
    int pixels_per_thread;                   // 4: native-scale path, 1: resampling path
    long long stride_c, stride_y, stride_x;  // output strides in elements
    float scale[3], bias[3];
};

struct FrameJob {
    unsigned long long luma, chroma;  // device addresses of the Y plane and the interleaved UV plane
    unsigned long long output;        // address of element (c=0, y=0, x=0) of this frame's output
    unsigned long long gray_sum;      // address of the frame's grayscale sum (contrast; 64-bit, 2^-24 units), or 0
    int luma_pitch, chroma_pitch;     // bytes per row
    int source_width, source_height;
    float origin_x, origin_y;         // source window along the stored x and y axes (source pixels)
    float step_x, step_y;             // source pixels per output pixel along them
    int low_x, high_x, low_y, high_y; // source samples that may be read: [low, high)
    int reverse_x, reverse_y;         // the output runs backwards along the stored axis
    int transpose, bit_shift;         // transpose: output x runs along stored y; bit_shift: 16 - bit depth for P016
    int color_ops;                    // adjustments in order, 3 bits each from the lowest, 0 ends:
                                      // 1 brightness, 2 contrast, 3 saturation, 4 hue, 5 grayscale
    float adjust[4];                  // brightness, contrast, saturation factors; hue turn
    float color[8];                   // y_offset, y_scale, c_offset, c_scale, r_cr, g_cb, g_cr, b_cb
};

#ifndef VCLIP_HOST_SHIM
__device__ __forceinline__ unsigned short vclip_f32_to_f16_bits(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
__device__ __forceinline__ unsigned int vclip_float_bits(float v) { return __float_as_uint(v); }

// Sum over the 32 threads of a warp (a row of 32 threads of a block), and whether this thread adds it.
__device__ __forceinline__ unsigned long long vclip_warp_sum(unsigned long long v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}
__device__ __forceinline__ bool vclip_lane_leads() { return (threadIdx.x & 31) == 0; }
#endif

struct Float16Bits { unsigned short bits; };
struct Bfloat16Bits { unsigned short bits; };

// Round to nearest even, as torch's float -> bfloat16 (inputs are finite).
__device__ __forceinline__ unsigned short vclip_f32_to_bf16_bits(float v) {
    unsigned int bits = vclip_float_bits(v);
    return (unsigned short)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ unsigned short bits16(const Float16Bits*, float v) { return vclip_f32_to_f16_bits(v); }
__device__ __forceinline__ unsigned short bits16(const Bfloat16Bits*, float v) { return vclip_f32_to_bf16_bits(v); }

__device__ __forceinline__ void store(unsigned char* p, float v) { *p = (unsigned char)(v + 0.5f); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(Float16Bits* p, float v) { p->bits = bits16(p, v); }
__device__ __forceinline__ void store(Bfloat16Bits* p, float v) { p->bits = bits16(p, v); }

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

__device__ __forceinline__ float gray_of(const float* rgb) { return 0.2989f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2]; }

__device__ __forceinline__ float unit_clamp(float v) { return fminf(fmaxf(v, 0.0f), 1.0f); }

// out = clamp(factor * rgb + (1 - factor) * other, 0, 1), torchvision's blend of float pictures.
__device__ __forceinline__ void blend(float* rgb, float other, float factor) {
    for (int k = 0; k < 3; ++k) rgb[k] = unit_clamp(factor * rgb[k] + (1.0f - factor) * other);
}

// The hue turned by `turn` of a full circle, saturation and value kept (HSV).
__device__ __forceinline__ void turn_hue(float* rgb, float turn) {
    float r = rgb[0], g = rgb[1], b = rgb[2];
    float value = fmaxf(r, fmaxf(g, b));
    float spread = value - fminf(r, fminf(g, b));
    if (spread == 0.0f) return;  // gray: no hue to turn
    float saturation = spread / value;
    float sector = value == r ? (g - b) / spread : value == g ? 2.0f + (b - r) / spread : 4.0f + (r - g) / spread;
    float hue = sector / 6.0f + 1.0f;
    hue -= floorf(hue);
    hue += turn;
    hue -= floorf(hue);
    float scaled = hue * 6.0f;
    float part = floorf(scaled);
    float fraction = scaled - part;
    float low = value * (1.0f - saturation);
    float falling = value * (1.0f - saturation * fraction);
    float rising = value * (1.0f - saturation * (1.0f - fraction));
    switch (((int)part) % 6) {
        case 0: rgb[0] = value; rgb[1] = rising; rgb[2] = low; break;
        case 1: rgb[0] = falling; rgb[1] = value; rgb[2] = low; break;
        case 2: rgb[0] = low; rgb[1] = value; rgb[2] = rising; break;
        case 3: rgb[0] = low; rgb[1] = falling; rgb[2] = value; break;
        case 4: rgb[0] = rising; rgb[1] = low; rgb[2] = value; break;
        default: rgb[0] = value; rgb[1] = low; rgb[2] = falling; break;
    }
}

// The job's colour adjustments in order; `mean`: the frame's mean grayscale before the contrast
// change. With before_contrast, stops where the contrast change would apply (the statistics pass).
__device__ __forceinline__ void adjust_colors(const FrameJob& job, float mean, bool before_contrast, float* rgb) {
    for (int ops = job.color_ops; ops != 0; ops >>= 3) {
        int op = ops & 7;
        if (op == 1) {
            for (int k = 0; k < 3; ++k) rgb[k] = unit_clamp(rgb[k] * job.adjust[0]);
        } else if (op == 2) {
            if (before_contrast) return;
            blend(rgb, mean, job.adjust[1]);
        } else if (op == 3) {
            blend(rgb, gray_of(rgb), job.adjust[2]);
        } else if (op == 4) {
            turn_hue(rgb, job.adjust[3]);
        } else {
            float gray = gray_of(rgb);
            for (int k = 0; k < 3; ++k) rgb[k] = gray;
        }
    }
}

#define VCLIP_GRAY_UNIT 16777216.0f  // fixed-point units of the grayscale sum: 2^24 per 1.0

// The frame's mean grayscale before its contrast change (0 when it has none).
__device__ __forceinline__ float contrast_mean(const TransformParams& p, const FrameJob& job) {
    if (job.gray_sum == 0) return 0.0f;
    float sum = (float)*(const unsigned long long*)job.gray_sum * (1.0f / VCLIP_GRAY_UNIT);
    return sum / ((float)p.output_width * (float)p.output_height);
}

template <typename Out, bool Extended>
__device__ __forceinline__ void store_pixel(const TransformParams& p, const FrameJob& job, float mean, Out* out,
                                            float* rgb) {
    if (Extended) adjust_colors(job, mean, false, rgb);
    for (int k = 0; k < 3; ++k) store(out + k * p.stride_c, rgb[k] * p.scale[k] + p.bias[k]);
}

// -- resampling path -------------------------------------------------------------------------------
// Sample positions and weights along one axis for one output coordinate. Sample k is at
// (first + k) >> shift; shift is 1 when chroma is read under each luma sample (bilinear, triangle).
struct Taps {
    int first, count, shift, kind;   // kind: the filter (0 bilinear, 1 area, 2 triangle) of this axis
    float low, high, inverse_width;  // area: source interval [low, high) and 1 / its width
    float center, inverse_total;     // triangle: the interval's centre, 1 / the weights' sum
    float fraction;                  // bilinear: weight of the second sample
};

__device__ __forceinline__ float triangle_weight(const Taps& t, int k) {
    return fmaxf(0.0f, 1.0f - fabsf(((float)(t.first + k) + 0.5f - t.center) * t.inverse_width));
}

// Taps of output sample k of `count` along one stored axis (reversed when `reverse`).
template <bool Extended>
__device__ __forceinline__ Taps luma_taps(int k, int count, float origin, float step, int low, int high, int reverse,
                                          int filter) {
    Taps t;
    int j = reverse ? count - 1 - k : k;
    t.shift = 0;
    t.kind = step > 1.0f ? filter : 0;
    t.low = t.high = t.inverse_width = t.center = t.inverse_total = t.fraction = 0.0f;
    if (t.kind == 1) {
        t.low = fmaxf(origin + (float)j * step, (float)low);
        t.high = fminf(origin + (float)(j + 1) * step, (float)high);
        t.inverse_width = 1.0f / step;
        t.first = (int)floorf(t.low);
        t.count = min((int)ceilf(t.high), high) - t.first;
    } else if (Extended && t.kind == 2) {
        t.center = origin + ((float)j + 0.5f) * step;
        t.inverse_width = 1.0f / step;
        t.first = max((int)floorf(t.center - step + 0.5f), low);
        t.count = min((int)floorf(t.center + step + 0.5f), high) - t.first;
        float total = 0.0f;
        for (int i = 0; i < t.count; ++i) total += triangle_weight(t, i);
        t.inverse_total = 1.0f / total;
    } else {
        float position = fminf(fmaxf(origin + ((float)j + 0.5f) * step - 0.5f, (float)low), (float)(high - 1));
        t.first = (int)floorf(position);
        t.fraction = position - t.first;
        t.count = (t.fraction > 0.0f && t.first + 1 < high) ? 2 : 1;
    }
    return t;
}

// Chroma taps for the same output coordinate: the luma footprint in chroma units (area), or the
// chroma sample under each luma sample with the luma weights (bilinear, triangle).
__device__ __forceinline__ Taps chroma_taps(const Taps& luma) {
    Taps t = luma;
    if (luma.kind == 1) {
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
template <bool Extended>
__device__ __forceinline__ float tap_weight(const Taps& t, int k) {
    if (t.kind == 1) {
        float i = (float)(t.first + k);
        return (fminf(t.high, i + 1.0f) - fmaxf(t.low, i)) * t.inverse_width;
    }
    if (Extended && t.kind == 2) return triangle_weight(t, k) * t.inverse_total;
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
template <typename In, int C, bool Extended>
__device__ __forceinline__ void row_sum(const In* row, const Taps& t, int shift, float* sum) {
    if (t.kind == 1) {
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
            for (int k = 0; k < t.count; ++k) sum[c] += tap_weight<Extended>(t, k) * (float)(row[tap_index(t, k) * C + c] >> shift);
        }
    }
}

template <typename In, int C, bool Extended>
__device__ __forceinline__ void resample(const unsigned char* plane, int pitch, const Taps& x, const Taps& y,
                                         int shift, float* value) {
    for (int c = 0; c < C; ++c) value[c] = 0.0f;
    for (int j = 0; j < y.count; ++j) {
        float row[C];
        row_sum<In, C, Extended>((const In*)(plane + (long long)tap_index(y, j) * pitch), x, shift, row);
        float w = tap_weight<Extended>(y, j);
        for (int c = 0; c < C; ++c) value[c] += w * row[c];
    }
}

// RGB in [0, 1] of output pixel (ox, oy), before the colour adjustments.
template <typename In, bool Extended>
__device__ __forceinline__ void source_rgb(const TransformParams& p, const FrameJob& job, int ox, int oy, float* rgb) {
    int ax = job.transpose ? oy : ox, ay = job.transpose ? ox : oy;  // output coordinates along stored x, y
    int count_x = job.transpose ? p.output_height : p.output_width;
    int count_y = job.transpose ? p.output_width : p.output_height;
    Taps lx = luma_taps<Extended>(ax, count_x, job.origin_x, job.step_x, job.low_x, job.high_x, job.reverse_x, p.filter);
    Taps ly = luma_taps<Extended>(ay, count_y, job.origin_y, job.step_y, job.low_y, job.high_y, job.reverse_y, p.filter);
    float y, uv[2];
    resample<In, 1, Extended>((const unsigned char*)job.luma, job.luma_pitch, lx, ly, job.bit_shift, &y);
    resample<In, 2, Extended>((const unsigned char*)job.chroma, job.chroma_pitch, chroma_taps(lx), chroma_taps(ly), job.bit_shift, uv);
    yuv_to_rgb(job.color, y, uv[0], uv[1], rgb);
}

template <typename In, typename Out, bool Extended>
__device__ __forceinline__ void transform_pixel(const TransformParams& p, const FrameJob& job, float mean, int ox, int oy) {
    float rgb[3];
    source_rgb<In, Extended>(p, job, ox, oy, rgb);
    store_pixel<Out, Extended>(p, job, mean, (Out*)job.output + (long long)oy * p.stride_y + (long long)ox * p.stride_x, rgb);
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
template <typename Half>  // Float16Bits, Bfloat16Bits
__device__ __forceinline__ void store4_contiguous(Half* out, const float* values) {
    if (aligned(out, 8)) {
        unsigned long long word = 0;
        for (int k = 0; k < 4; ++k) word |= (unsigned long long)bits16(out, values[k]) << (16 * k);
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
template <typename Half>  // Float16Bits, Bfloat16Bits
__device__ __forceinline__ bool store12_interleaved(Half* out, const float (*values)[4]) {
    if (!aligned(out, 8)) return false;
    for (int w = 0; w < 3; ++w) {
        unsigned long long word = 0;
        for (int b = 0; b < 4; ++b) {
            int i = 4 * w + b;
            word |= (unsigned long long)bits16(out, values[i % 3][i / 3]) << (16 * b);
        }
        ((unsigned long long*)out)[w] = word;
    }
    return true;
}

template <typename In, typename Out, bool Extended>
__device__ __forceinline__ void transform_native4(const TransformParams& p, const FrameJob& job, float mean, int x0,
                                                  int oy) {
    // Output pixels x0..x0+3 come from 4 consecutive source columns starting at `first`, in
    // reverse order when the stored x axis runs backwards (the flip or the orientation's mirror).
    int origin_x = (int)job.origin_x, origin_y = (int)job.origin_y;
    int first = origin_x + (job.reverse_x ? p.output_width - 4 - x0 : x0);
    int row = origin_y + (job.reverse_y ? p.output_height - 1 - oy : oy);
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
        int source = job.reverse_x ? 3 - k : k;
        float rgb[3];
        yuv_to_rgb(job.color, y[source], u[source], v[source], rgb);
        if (Extended) adjust_colors(job, mean, false, rgb);
        for (int c = 0; c < 3; ++c) values[c][k] = rgb[c] * p.scale[c] + p.bias[c];
    }
    Out* out = (Out*)job.output + (long long)oy * p.stride_y + (long long)x0 * p.stride_x;
    if (p.stride_c == 1 && p.stride_x == 3 && store12_interleaved(out, values)) return;
    for (int c = 0; c < 3; ++c) {
        if (p.stride_x == 1) store4_contiguous(out + c * p.stride_c, values[c]);
        else store4(out + c * p.stride_c, p.stride_x, values[c]);
    }
}

template <typename In, typename Out, bool Extended>
__device__ __forceinline__ void transform_thread(const TransformParams& p, const FrameJob& job) {
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * p.pixels_per_thread;
    if (oy >= p.output_height || x0 >= p.output_width) return;
    float mean = Extended ? contrast_mean(p, job) : 0.0f;
    if (p.pixels_per_thread == 4 && x0 + 4 <= p.output_width) {
        transform_native4<In, Out, Extended>(p, job, mean, x0, oy);
        return;
    }
    for (int ox = x0; ox < min(x0 + p.pixels_per_thread, p.output_width); ++ox) {
        transform_pixel<In, Out, Extended>(p, job, mean, ox, oy);
    }
}

// Launched with VCLIP_BLOCK_THREADS threads per block (BLOCK in vclip/_engine/kernel_args.py). At most
// 32 registers per thread, so that 8 blocks (2048 threads) fit on an SM: latency, not arithmetic,
// limits this kernel, and on an H200 the 64 registers the compiler took otherwise cost 10-40%.
#define VCLIP_BLOCK_THREADS 256
#define VCLIP_BLOCKS_PER_SM 8


// Adds the grayscale of every output pixel of the frame, as it is where the contrast change
// applies, to *job.gray_sum (zeroed before), in fixed point. One pixel per thread, a warp's sum
// added at once.
template <typename In>
__device__ __forceinline__ void gray_sum_thread(const TransformParams& p, const FrameJob& job) {
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long value = 0;
    if (oy < p.output_height && ox < p.output_width) {
        float rgb[3];
        source_rgb<In, true>(p, job, ox, oy, rgb);
        adjust_colors(job, 0.0f, true, rgb);
        value = (unsigned long long)(gray_of(rgb) * VCLIP_GRAY_UNIT + 0.5f);
    }
    value = vclip_warp_sum(value);
    if (vclip_lane_leads()) atomicAdd((unsigned long long*)job.gray_sum, value);
}

// The kernels, one frame per launch: the job travels by value (no host-to-device copy). One per
// sample type (NV12: unsigned char, P016: unsigned short), output type and set of extensions, with
// C names: CuPy keeps a module of plain names in its on-disk cache, and compiles one again in
// every process when it must look up template instantiations by name. vclip compiles each kernel
// on its own, when first used (VCLIP_SELECTED_KERNELS, and the one line of the kernel appended),
// so that a fresh machine builds only the kernels it runs.
#define VCLIP_KERNEL(name, body)                                                                   \
    extern "C" __global__ void __launch_bounds__(VCLIP_BLOCK_THREADS, VCLIP_BLOCKS_PER_SM)        \
        name(TransformParams p, FrameJob job) {                                                     \
        body(p, job);                                                                               \
    }
#define VCLIP_IN_nv12 unsigned char
#define VCLIP_IN_p016 unsigned short
#define VCLIP_OUT_uint8 unsigned char
#define VCLIP_OUT_float16 Float16Bits
#define VCLIP_OUT_float32 float
#define VCLIP_OUT_bfloat16 Bfloat16Bits
#define VCLIP_TRANSFORM_KERNEL(source, dtype)                                                      \
    VCLIP_KERNEL(vclip_transform_##source##_##dtype, (transform_thread<VCLIP_IN_##source, VCLIP_OUT_##dtype, false>))
#define VCLIP_EXTENDED_KERNEL(source, dtype)                                                       \
    VCLIP_KERNEL(vclip_transform_##source##_##dtype##_extended,                                    \
                 (transform_thread<VCLIP_IN_##source, VCLIP_OUT_##dtype, true>))
#define VCLIP_GRAY_SUM_KERNEL(source) VCLIP_KERNEL(vclip_gray_sum_##source, gray_sum_thread<VCLIP_IN_##source>)
#define VCLIP_SOURCE_KERNELS(source)                                                               \
    VCLIP_TRANSFORM_KERNEL(source, uint8) VCLIP_EXTENDED_KERNEL(source, uint8)                     \
    VCLIP_TRANSFORM_KERNEL(source, float16) VCLIP_EXTENDED_KERNEL(source, float16)                 \
    VCLIP_TRANSFORM_KERNEL(source, float32) VCLIP_EXTENDED_KERNEL(source, float32)                 \
    VCLIP_TRANSFORM_KERNEL(source, bfloat16) VCLIP_EXTENDED_KERNEL(source, bfloat16)               \
    VCLIP_GRAY_SUM_KERNEL(source)
#ifndef VCLIP_SELECTED_KERNELS
VCLIP_SOURCE_KERNELS(nv12)
VCLIP_SOURCE_KERNELS(p016)
#endif
