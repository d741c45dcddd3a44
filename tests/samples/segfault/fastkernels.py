"""A 'compiled extension' that crashes the interpreter on import."""
import ctypes

ctypes.string_at(0)
