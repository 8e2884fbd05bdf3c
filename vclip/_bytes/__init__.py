"""Where a video's bytes are: files, URLs read by byte range (timeouts, retries, servers without
Range), slices, bytes and file objects, tar members of WebDataset shards and the names of shards,
and content fingerprints. (Private.)"""
