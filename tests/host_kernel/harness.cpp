// Host harness: runs the kernel of nv12_transform.cu over an emulated grid, one thread at a time,
// one launch per frame as the NVDEC backend launches it (the body of its vclip_transform_* kernels).
#include <cstddef>

#include "cuda_host_shim.h"
#include VCLIP_KERNEL_SOURCE

template <typename In, typename Out>
static void launch(const TransformParams* params, const FrameJob* jobs, int job_count) {
    blockDim = {32, 8, 1};
    unsigned columns = 32u * (unsigned)params->pixels_per_thread;
    gridDim = {((unsigned)params->output_width + columns - 1) / columns, (unsigned)(params->output_height + 7) / 8, 1};
    for (int job = 0; job < job_count; ++job)
        for (unsigned by = 0; by < gridDim.y; ++by)
            for (unsigned bx = 0; bx < gridDim.x; ++bx)
                for (unsigned ty = 0; ty < blockDim.y; ++ty)
                    for (unsigned tx = 0; tx < blockDim.x; ++tx) {
                        blockIdx = {bx, by, 0};
                        threadIdx = {tx, ty, 0};
                        transform_thread<In, Out>(*params, jobs[job]);
                    }
}

// input_bytes: 1 (NV12) or 2 (P016); output_kind: 0 uint8, 1 float16, 2 float32.
extern "C" int vclip_host_transform(int input_bytes, int output_kind, const TransformParams* params,
                                    const FrameJob* jobs, int job_count) {
    if (input_bytes == 1) {
        if (output_kind == 0) launch<unsigned char, unsigned char>(params, jobs, job_count);
        else if (output_kind == 1) launch<unsigned char, Float16Bits>(params, jobs, job_count);
        else launch<unsigned char, float>(params, jobs, job_count);
    } else {
        if (output_kind == 0) launch<unsigned short, unsigned char>(params, jobs, job_count);
        else if (output_kind == 1) launch<unsigned short, Float16Bits>(params, jobs, job_count);
        else launch<unsigned short, float>(params, jobs, job_count);
    }
    return 0;
}

// Sizes and field offsets of the argument structs, to check the NumPy dtypes against the C layout.
extern "C" void vclip_host_struct_layout(long long* out) {
    out[0] = sizeof(TransformParams);
    out[1] = offsetof(TransformParams, stride_c);
    out[2] = offsetof(TransformParams, scale);
    out[3] = offsetof(TransformParams, bias);
    out[4] = sizeof(FrameJob);
    out[5] = offsetof(FrameJob, luma_pitch);
    out[6] = offsetof(FrameJob, crop_x);
    out[7] = offsetof(FrameJob, bit_shift);
    out[8] = offsetof(FrameJob, color);
}
