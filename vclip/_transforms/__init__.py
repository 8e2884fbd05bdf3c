"""The parts of a transform spec: the training augmentations, frame geometry and their draws, and
torchvision pipelines read as fused specs. (Private; :mod:`vclip.transforms` is the face.)"""
