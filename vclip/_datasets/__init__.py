"""Where a dataset's videos come from and with which labels: (path, label) pairs, list files, class
folders, WebDataset shards as a source and as a stream, and writing shards. (Private.)"""
