"""Running work over many videos: the one job runner (in this thread, threads, processes or Ray
tasks) and its worker pools, worker processes that run vclip's own code in a fresh interpreter, and
CPU decoders beside a GPU job. (Private.)"""
