// Host harness: the thread functions of shot_features.cu over the whole grid of each launch, one
// thread at a time, in the order vclip/_scenes/features_cuda.py launches them.
#include "cuda_host_shim.h"
#include VCLIP_KERNEL_SOURCE

// counts, luma_sums and dark_counts start at 0, as the device's do.
extern "C" void vclip_host_shot_features(const unsigned char* frames, int num_frames, int height, int width,
                                         int columns, int num_blocks, int block_h, int block_w,
                                         unsigned int* counts, unsigned long long* luma_sums,
                                         unsigned int* dark_counts, float* histograms, float* blocks,
                                         float* luma_means, float* dark_shares) {
    for (int frame = 0; frame < num_frames; ++frame)
        for (int row = 0; row < height; ++row)
            shot_row_thread(frames, height, width, frame, row, counts, luma_sums, dark_counts);
    for (int frame = 0; frame < num_frames; ++frame)
        for (int block = 0; block < num_blocks; ++block)
            for (int channel = 0; channel < 3; ++channel)
                shot_block_thread(frames, height, width, frame, block, channel, columns, num_blocks, block_h,
                                  block_w, blocks);
    for (int frame = 0; frame < num_frames; ++frame)
        for (int bin = 0; bin < VCLIP_SHOT_BINS; ++bin)
            shot_finish_thread(frame, bin, height * width, counts, luma_sums, dark_counts, histograms, luma_means,
                               dark_shares);
}

extern "C" void vclip_host_shot_gaps(int max_gap, int num_frames, int num_blocks, const float* histograms,
                                     const float* blocks, const float* earlier_histograms,
                                     const float* earlier_blocks, int num_earlier, float* hist_table,
                                     float* block_table) {
    for (int gap = 0; gap <= max_gap; ++gap)
        for (int t = 0; t < num_frames; ++t)
            shot_gap_thread(gap, t, num_frames, num_blocks, histograms, blocks, earlier_histograms, earlier_blocks,
                            num_earlier, hist_table, block_table);
}
