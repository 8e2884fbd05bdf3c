import numpy as np

import vclip


def test_segment_starts_at_keyframe_and_stops_after_last_needed(videos):
    index = vclip.index_video(videos["h264"])  # keyframes every 30 frames
    plan = vclip.plan_decode(index, [[40, 44]])
    (segment,) = plan.segments
    assert index.packet_is_keyframe[segment.packets[0]] and index.packet_frame[segment.packets[0]] == 30
    assert segment.packets[-1] == max(index.frame_packet[40], index.frame_packet[44])
    assert segment.frames.tolist() == [40, 44]


def test_requests_in_one_gop_are_merged_and_each_gop_decoded_once(videos):
    index = vclip.index_video(videos["h264"])
    plan = vclip.plan_decode(index, [[31, 35], [33, 36, 36], [95], [100, 2]])
    assert plan.frames.tolist() == [2, 31, 33, 35, 36, 95, 100]
    starts = [int(index.packet_frame[s.packets[0]]) for s in plan.segments]
    assert starts == [0, 30, 90]
    all_packets = np.concatenate([s.packets for s in plan.segments])
    assert len(set(all_packets.tolist())) == all_packets.size  # no packet decoded twice


def test_runs_that_reach_the_next_keyframe_continue_through_it(videos):
    index = vclip.index_video(videos["h264"])
    plan = vclip.plan_decode(index, [[28, 29, 30, 31]])
    assert len(plan.segments) == 1
    assert plan.segments[0].frames.tolist() == [28, 29, 30, 31]


def test_non_reference_pictures_are_skipped_unless_requested(videos):
    index = vclip.index_video(videos["long_gop"])
    wanted = list(range(100, 131, 2))
    full = vclip.plan_decode(index, [wanted], skip_non_reference=False)
    lean = vclip.plan_decode(index, [wanted])
    assert lean.packets_sent < full.packets_sent
    sent = lean.segments[0].packets
    skipped = np.setdiff1d(full.segments[0].packets, sent)
    assert not index.packet_is_reference[skipped].any()
    assert set(index.frame_packet[wanted].tolist()) <= set(sent.tolist())
    # every reference picture up to the last needed one is still sent
    assert np.all(index.packet_is_reference[full.segments[0].packets] <= np.isin(full.segments[0].packets, sent))


def test_empty_request_plans_nothing(videos):
    plan = vclip.plan_decode(vclip.index_video(videos["h264"]), [])
    assert plan.segments == () and plan.packets_sent == 0
