"""The ``gpu`` marker: tests that run kernels on an NVIDIA device (they skip
with the reason where there is none; ``-m "not gpu"`` deselects them)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: runs CUDA kernels on an NVIDIA GPU (skips without one)")
