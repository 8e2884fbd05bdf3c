"""Keyframes and shots: the scene method of shot detection (per-frame features, NumPy and CUDA
through ``kernels/shot_features.cu``, the rules and the decisions that turn them into shot
boundaries), and the keyframes of a video as a result that writes itself out. (Private.)"""
