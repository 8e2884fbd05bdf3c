"""What one demux pass tells about a video stream: the index record, the display matrix, bitstream
facts, the demux pass itself, reading chosen packets back, and the caches that serve indexes.
(Private.)"""
