// vclip: the scene method's per-frame features and frame-to-frame distances on the GPU. The NumPy
// twin, vclip/_scenes/features.py, says what each one measures (vclip/_scenes/shots.py reads the boundaries);
// this file computes the same values (the same bits, but for the order of one float sum in H).
//
// Analysis frames are RGB uint8, [frames][height][width][3], contiguous. Per frame:
//   histogram  pixels per bin of the 4x4x4 joint RGB histogram (the top 2 bits of each channel),
//              then as fractions of the pixels
//   blocks     mean RGB of each block of the rows x columns grid of block_h x block_w pixels
//   luma       the sum of 299 R + 587 G + 114 B over the frame (1000 x the BT.601 luma, an exact
//              integer) and the pixels whose luma is below 24, so no total depends on the order
//              in which threads add to it; then the mean luma and the dark share
// Between frame t and frame t - gap, gap = 1..max_gap (NaN where there is no such frame, and at gap 0):
//   H  half the L1 distance of the two histograms
//   B  the upper median over blocks of |dR| + |dG| + |dB| of their means, / (3 x 255); a thread finds
//      it by bisecting the bits of a float (non-negative floats order as their bits), so it needs no
//      copy of the block differences
// The frames before a chunk ("earlier": the last max_gap frames of the chunk before) come as their
// own arrays, so a chunk's distances need no concatenation.
//
// No thread waits for another (no shared memory, no barriers): tests/host_kernel/shot_harness.cpp
// runs the same thread functions on the host, one at a time, so CI checks this source without a GPU.

#define VCLIP_SHOT_BINS 64
#define VCLIP_DARK_LUMA_1000 24000u

// Row `row` of frame `frame`: its pixels into the frame's histogram counts, luma sum and dark count.
__device__ __forceinline__ void shot_row_thread(const unsigned char* frames, int height, int width, int frame,
                                                int row, unsigned int* counts, unsigned long long* luma_sums,
                                                unsigned int* dark_counts) {
    const unsigned char* pixel = frames + ((long long)frame * height + row) * width * 3;
    unsigned int* histogram = counts + (long long)frame * VCLIP_SHOT_BINS;
    unsigned long long luma = 0;
    unsigned int dark = 0;
    for (int x = 0; x < width; ++x, pixel += 3) {
        const unsigned int r = pixel[0], g = pixel[1], b = pixel[2];
        atomicAdd(&histogram[((r >> 6) * 4 + (g >> 6)) * 4 + (b >> 6)], 1u);
        const unsigned int weighted = 299u * r + 587u * g + 114u * b;
        luma += weighted;
        dark += weighted < VCLIP_DARK_LUMA_1000 ? 1u : 0u;
    }
    atomicAdd(&luma_sums[frame], luma);
    atomicAdd(&dark_counts[frame], dark);
}

// Channel `channel` of block `block` (row-major in the grid) of frame `frame`: its mean.
__device__ __forceinline__ void shot_block_thread(const unsigned char* frames, int height, int width, int frame,
                                                  int block, int channel, int columns, int num_blocks,
                                                  int block_h, int block_w, float* blocks) {
    const int top = (block / columns) * block_h, left = (block % columns) * block_w;
    const unsigned char* picture = frames + (long long)frame * height * width * 3;
    unsigned int sum = 0;
    for (int y = top; y < top + block_h; ++y)
        for (int x = left; x < left + block_w; ++x) sum += picture[((long long)y * width + x) * 3 + channel];
    blocks[((long long)frame * num_blocks + block) * 3 + channel] = (float)sum / (float)(block_h * block_w);
}

// Bin `bin` of frame `frame` as a fraction of the pixels; for bin 0 also the mean luma and the dark share.
__device__ __forceinline__ void shot_finish_thread(int frame, int bin, int pixels, const unsigned int* counts,
                                                   const unsigned long long* luma_sums,
                                                   const unsigned int* dark_counts, float* histograms,
                                                   float* luma_means, float* dark_shares) {
    const long long at = (long long)frame * VCLIP_SHOT_BINS + bin;
    histograms[at] = (float)counts[at] / (float)pixels;
    if (bin == 0) {
        luma_means[frame] = (float)((double)luma_sums[frame] / (1000.0 * (double)pixels));
        dark_shares[frame] = (float)dark_counts[frame] / (float)pixels;
    }
}

// Frame `index` of a chunk (negative: of the `num_earlier` frames before it), `size` values per frame.
__device__ __forceinline__ const float* shot_frame_row(const float* current, const float* earlier, int num_earlier,
                                                       int index, int size) {
    return index >= 0 ? current + (long long)index * size : earlier + (long long)(num_earlier + index) * size;
}

// The H and B distances of frame `t` of the chunk to the frame `gap` before it.
__device__ __forceinline__ void shot_gap_thread(int gap, int t, int num_frames, int num_blocks,
                                                const float* histograms, const float* blocks,
                                                const float* earlier_histograms, const float* earlier_blocks,
                                                int num_earlier, float* hist_table, float* block_table) {
    const long long at = (long long)gap * num_frames + t;
    const int sooner = t - gap;
    if (gap == 0 || sooner < -num_earlier) {
        hist_table[at] = __uint_as_float(0x7fc00000u);  // NaN
        block_table[at] = __uint_as_float(0x7fc00000u);
        return;
    }
    const float* later = histograms + (long long)t * VCLIP_SHOT_BINS;
    const float* before = shot_frame_row(histograms, earlier_histograms, num_earlier, sooner, VCLIP_SHOT_BINS);
    float total = 0.0f;
    for (int bin = 0; bin < VCLIP_SHOT_BINS; ++bin) total += fabsf(later[bin] - before[bin]);
    hist_table[at] = 0.5f * total;

    const float* later_blocks = blocks + (long long)t * num_blocks * 3;
    const float* before_blocks = shot_frame_row(blocks, earlier_blocks, num_earlier, sooner, num_blocks * 3);
    const int middle = num_blocks / 2;
    unsigned int low = 0u, high = 0x7f800000u;  // the answer's bits lie in [low, high] (+inf at most)
    while (low < high) {  // the smallest value with more than `middle` block changes at most it
        const unsigned int mid = low + (high - low) / 2;
        const float value = __uint_as_float(mid);
        int at_most = 0;
        for (int k = 0; k < 3 * num_blocks; k += 3) {
            const float change = (fabsf(later_blocks[k] - before_blocks[k]) +
                                  fabsf(later_blocks[k + 1] - before_blocks[k + 1])) +
                                 fabsf(later_blocks[k + 2] - before_blocks[k + 2]);
            at_most += change <= value ? 1 : 0;
        }
        if (at_most > middle) high = mid;
        else low = mid + 1;
    }
    block_table[at] = __uint_as_float(low) / (3.0f * 255.0f);
}

#ifndef VCLIP_HOST_SHIM

// One thread per (frame, row) of `num_frames` frames; counts, luma_sums and dark_counts start at 0.
extern "C" __global__ void vclip_shot_rows(const unsigned char* frames, int num_frames, int height, int width,
                                           unsigned int* counts, unsigned long long* luma_sums,
                                           unsigned int* dark_counts) {
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (thread >= (long long)num_frames * height) return;
    shot_row_thread(frames, height, width, (int)(thread / height), (int)(thread % height), counts, luma_sums,
                    dark_counts);
}

// One thread per (frame, block, channel).
extern "C" __global__ void vclip_shot_blocks(const unsigned char* frames, int num_frames, int height, int width,
                                             int columns, int num_blocks, int block_h, int block_w, float* blocks) {
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long per_frame = (long long)num_blocks * 3;
    if (thread >= num_frames * per_frame) return;
    const int frame = (int)(thread / per_frame), item = (int)(thread % per_frame);
    shot_block_thread(frames, height, width, frame, item / 3, item % 3, columns, num_blocks, block_h, block_w,
                      blocks);
}

// One thread per (frame, bin), after vclip_shot_rows.
extern "C" __global__ void vclip_shot_finish(int num_frames, int pixels, const unsigned int* counts,
                                             const unsigned long long* luma_sums, const unsigned int* dark_counts,
                                             float* histograms, float* luma_means, float* dark_shares) {
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (thread >= (long long)num_frames * VCLIP_SHOT_BINS) return;
    shot_finish_thread((int)(thread / VCLIP_SHOT_BINS), (int)(thread % VCLIP_SHOT_BINS), pixels, counts, luma_sums,
                       dark_counts, histograms, luma_means, dark_shares);
}

// Grid x: frames of the chunk, grid y: gaps 0..max_gap; tables are [max_gap + 1][num_frames].
extern "C" __global__ void vclip_shot_gaps(int num_frames, int num_blocks, const float* histograms,
                                           const float* blocks, const float* earlier_histograms,
                                           const float* earlier_blocks, int num_earlier, float* hist_table,
                                           float* block_table) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_frames) return;
    shot_gap_thread((int)blockIdx.y, t, num_frames, num_blocks, histograms, blocks, earlier_histograms,
                    earlier_blocks, num_earlier, hist_table, block_table);
}

#endif
