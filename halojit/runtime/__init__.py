"""Python side of the C++ runtime (``halojit._rt``): kernel cache dir and plans.

Kept tiny on purpose: import submodules (``halojit.runtime.cache``) directly.
"""
