"""The scene method of shot detection: per-frame features (NumPy, and CUDA through
``kernels/shot_features.cu``) and the decisions that turn them into shot boundaries. (Private.)"""
