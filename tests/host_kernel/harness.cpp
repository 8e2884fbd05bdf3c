// Host harness: runs the kernels of nv12_transform.cu over an emulated grid, one thread at a time,
// one launch per frame as the NVDEC backend launches them (the bodies of its vclip_* kernels; the
// grayscale sum first, where a frame's contrast changes).
#include <cstddef>

#include "cuda_host_shim.h"
#include VCLIP_KERNEL_SOURCE

template <typename Kernel>
static void run_grid(unsigned columns_per_block, unsigned width, unsigned height, Kernel kernel) {
    blockDim = {32, 8, 1};
    gridDim = {(width + columns_per_block - 1) / columns_per_block, (height + 7) / 8, 1};
    for (unsigned by = 0; by < gridDim.y; ++by)
        for (unsigned bx = 0; bx < gridDim.x; ++bx)
            for (unsigned ty = 0; ty < blockDim.y; ++ty)
                for (unsigned tx = 0; tx < blockDim.x; ++tx) {
                    blockIdx = {bx, by, 0};
                    threadIdx = {tx, ty, 0};
                    kernel();
                }
}

template <typename In, typename Out, bool Adjust>
static void launch(const TransformParams* params, const FrameJob* jobs, int job_count) {
    unsigned width = (unsigned)params->output_width, height = (unsigned)params->output_height;
    for (int job = 0; job < job_count; ++job) {
        if (jobs[job].gray_sum) run_grid(32u, width, height, [&] { gray_sum_thread<In>(*params, jobs[job]); });
        run_grid(32u * (unsigned)params->pixels_per_thread, width, height,
                 [&] { transform_thread<In, Out, Adjust>(*params, jobs[job]); });
    }
}

template <typename In, typename Out>
static void launch_extending(int extended, const TransformParams* params, const FrameJob* jobs, int job_count) {
    if (extended) launch<In, Out, true>(params, jobs, job_count);
    else launch<In, Out, false>(params, jobs, job_count);
}

template <typename In>
static void launch_output(int output_kind, int extended, const TransformParams* params, const FrameJob* jobs,
                          int job_count) {
    if (output_kind == 0) launch_extending<In, unsigned char>(extended, params, jobs, job_count);
    else if (output_kind == 1) launch_extending<In, Float16Bits>(extended, params, jobs, job_count);
    else if (output_kind == 2) launch_extending<In, float>(extended, params, jobs, job_count);
    else launch_extending<In, Bfloat16Bits>(extended, params, jobs, job_count);
}

// input_bytes: 1 (NV12) or 2 (P016); output_kind: 0 uint8, 1 float16, 2 float32, 3 bfloat16;
// extended: run the kernels with the training extensions (Extended == true).
extern "C" int vclip_host_transform(int input_bytes, int output_kind, const TransformParams* params,
                                    const FrameJob* jobs, int job_count, int extended) {
    if (input_bytes == 1) launch_output<unsigned char>(output_kind, extended, params, jobs, job_count);
    else launch_output<unsigned short>(output_kind, extended, params, jobs, job_count);
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
    out[6] = offsetof(FrameJob, origin_x);
    out[7] = offsetof(FrameJob, bit_shift);
    out[8] = offsetof(FrameJob, color);
    out[9] = offsetof(FrameJob, gray_sum);
    out[10] = offsetof(FrameJob, color_ops);
    out[11] = offsetof(FrameJob, adjust);
}
