"""The scene method of shot detection: per-frame features (NumPy, and CUDA through
``kernels/shot_features.cu``), the rules of its decisions, and the decisions that turn the features
into shot boundaries. (Private.)"""
