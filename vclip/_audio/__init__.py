"""The audio of clips: the demux pass and index of an audio stream, the time spans of clips, and
decoding a span to the sample. (Private.)"""
