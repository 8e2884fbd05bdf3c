"""Running work over many videos: the one job runner (threads, processes, Ray tasks), worker processes
that run vclip's own code in a fresh interpreter, CPU decoders beside a GPU job, and thread pools
shared by a process. (Private.)"""
