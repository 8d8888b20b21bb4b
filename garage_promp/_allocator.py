"""The learner process keeps the memory it frees, for its next tensors.

An outer step allocates and frees hundreds of tensors of 5-20 MB (one per
hidden activation of the whole meta-batch and per derivative of it). glibc's
malloc serves blocks that large with ``mmap`` and returns them with
``munmap`` (or trims them off the heap top), so every new tensor is fresh
memory whose pages fault in one by one as they are first written. Raising
the mmap and trim thresholds makes freed blocks stay in the heap and get
reused: on 2 cores at the paper HalfCheetah batch a ProMP update went from
1.4-1.8 s to 1.2-1.3 s, with the same peak memory (the learner's peak is
reached during the update either way; freed memory is kept, up to the trim
threshold, rather than returned to the OS between updates).

This changes only where memory comes from, never a computed value. It is
process-wide, applied by the algorithms' ``train`` in the learner process
(sampler workers are other processes), and only under glibc; elsewhere it
does nothing.
"""
import ctypes
import platform

# mallopt(3) parameters.
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

THRESHOLD = 1 << 30  # 1 GiB: blocks below it come from, and go back to, the heap
TOP_PAD = 64 << 20  # the heap grows 64 MiB at a time

_APPLIED = [False]


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (once).

    Returns:
        bool: True where applied (Linux with glibc), False elsewhere.

    """
    if _APPLIED[0]:
        return True
    if platform.system() != 'Linux':
        return False
    try:
        libc = ctypes.CDLL(None)  # the C library this process runs on
        if not hasattr(libc, 'gnu_get_libc_version'):  # glibc only
            return False
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    _APPLIED[0] = all(
        mallopt(option, value) == 1
        for option, value in ((_M_MMAP_THRESHOLD, THRESHOLD),
                              (_M_TRIM_THRESHOLD, THRESHOLD), (_M_TOP_PAD, TOP_PAD)))
    return _APPLIED[0]
