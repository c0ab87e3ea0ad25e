"""Functions the tuning tests tune; a module so that a new process (and the
CLI) can import the very same function."""

import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def double(x):
    return x * np.float32(2)


def total(x):
    return np.sum(x)
