"""torch.tpu: the device module, shaped like torch.cuda."""

import torch

from torchtpu import _C

def _lazy_init():
    """Loads the PJRT plugin and creates the client, once."""
    _C._init()


init = _lazy_init


def is_initialized() -> bool:
    return _C._is_initialized()


def __getattr__(name):
    # torch.utils.checkpoint saves and restores a device's RNG state only
    # when its module's `_initialized` (torch.cuda's flag) is true.
    if name == "_initialized":
        return is_initialized()
    if name == "default_generators":  # one per device, as torch.cuda's
        return tuple(_generator(i) for i in range(device_count()))
    raise AttributeError(f"module 'torch.tpu' has no attribute '{name}'")


def is_available() -> bool:
    """Whether a PJRT plugin loads and reports at least one device."""
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def _index(device=None, check=True) -> int:
    """The index of `device` (None: the current one). With `check`, an index
    out of range raises (starting the runtime to count the devices); -1
    passes as -1 (no device, as torch.cuda's device(-1))."""
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "tpu":
            raise ValueError(f"expected a tpu device, got {device}")
        if device.index is None:
            return current_device()
        device = device.index
    if not isinstance(device, int):
        raise TypeError(f"expected a device, got {type(device).__name__}")
    if check and device != -1:
        _lazy_init()  # (a missing plugin raises here, naming it)
        count = device_count()
        if not 0 <= device < count:
            raise RuntimeError(f"Invalid device index {device}: {count} tpu device(s) available")
    return device


def current_device() -> int:
    return _C._current_device()


def set_device(device) -> None:
    """As torch.cuda.set_device: a negative index changes nothing."""
    _lazy_init()
    index = _index(device)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, device):
        self.idx = _index(device, check=False) if device is not None else -1  # checked on entry
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = current_device()
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev >= 0:
            set_device(self.prev)
        return False


class device_of(device):
    """Context manager that makes the tensor's device current (a no-op for
    a tensor on another device type)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "tpu" else None)


def synchronize(device=None) -> None:
    """Waits for all work on the device (all devices with device=-1) and
    raises any error a device-side check recorded."""
    _lazy_init()
    _C._synchronize(-1 if device == -1 else _index(device))


#===--- random numbers ---===#

def _generator(device=None):
    _lazy_init()
    return _C._default_generator(_index(device))


def _get_generator(device: torch.device) -> torch.Generator:
    """The default generator of `device` (torch.compile's RNG handling asks
    each device module for it)."""
    return _generator(device)


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    # Does not start the runtime: torch.manual_seed calls this in every program.
    _C._manual_seed_all(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    for i in range(device_count()):
        _C._default_generator(i).seed()


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device="tpu") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device="tpu") -> None:
    _generator(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


def _is_in_bad_fork() -> bool:
    """True in a process forked after tpu was initialized: tpu cannot be
    used there (use the 'spawn' start method), and torch.manual_seed skips
    it."""
    return _C._is_in_bad_fork()


#===--- memory ---===#

# torch.cuda's name for it: what a failed device allocation raises.
OutOfMemoryError = torch.OutOfMemoryError


def memory_stats(device=None) -> dict:
    _lazy_init()
    return _C._memory_stats(_index(device))


def memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    _lazy_init()
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    """Zeroes the counts since the start: allocations, frees, their bytes, OOMs."""
    _lazy_init()
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Device buffers are freed as soon as their tensors are; nothing is cached."""


def mem_get_info(device=None):
    """(free, total) bytes of the device's memory. A device whose plugin
    reports no limit keeps its buffers in host memory (the CPU plugin):
    then the host's available and physical memory."""
    return _C._mem_get_info(_index(device))


_memory_fractions = {}  # device index -> the fraction set; 1.0 when never set


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Caps what this process may allocate on the device at `fraction` of
    its total memory (get_device_properties().total_memory), as torch.cuda's
    does: an op or a copy to the device whose new memory would pass the cap
    raises torch.OutOfMemoryError before it runs, leaving its inputs as they
    were. (In fused mode the error comes at the flush, or at the next sync
    or optimizer step for a graph compiled in the background, and the
    graph changes nothing, as any graph that fails to launch.)"""
    _lazy_init()
    index = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    total = get_device_properties(index).total_memory
    _C._set_memory_cap(index, 0 if fraction == 1 else max(int(fraction * total), 1))
    _memory_fractions[index] = fraction


def get_per_process_memory_fraction(device=None) -> float:
    _lazy_init()
    return _memory_fractions.get(_index(device), 1.0)


def memory_summary(device=None, abbreviated=False) -> str:
    """The device's memory statistics as a table (torch.cuda's shape, with
    the statistics this backend keeps: buffers are freed with their tensors,
    so reserved memory is allocated memory)."""
    rows = sorted(memory_stats(device).items())
    width = max(len(k) for k, _ in rows)
    lines = [f"tpu:{_index(device)} memory summary", "-" * (width + 18)]
    lines += [f"{k:<{width}}  {v:>16,}" for k, v in rows]
    return "\n".join(lines)


#===--- synchronizing operations ---===#

_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode) -> None:
    """As torch.cuda's: "default" (0) lets the host's reads of device data
    pass, "warn" (1) warns at each, "error" (2) raises instead of reading.
    A read is any wait of the host for a tensor's values: .item(), .cpu(),
    printing, the inputs of a CPU fallback. torch.tpu.synchronize() is
    never checked."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, "
                               "`warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    return _C._get_sync_debug_mode()


#===--- properties ---===#

class _DeviceProperties:
    def __init__(self, index, info):
        self.index = index
        self.name = f"{info['platform']} ({info['kind']})"
        self.type = info["kind"]
        self.platform = info["platform"]
        self.platform_version = info["platform_version"]
        self.plugin = info["plugin"]
        self.pjrt_api = info["pjrt_api"]
        self.stablehlo = info["stablehlo"]
        self.memory_limit = info["memory_limit"]  # the plugin's; 0: none reported

    @property
    def total_memory(self):
        # As mem_get_info's total: without a limit, the host's memory holds the buffers.
        return self.memory_limit or _C._mem_get_info(self.index)[1]

    def __repr__(self):
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
                f"pjrt_api='{self.pjrt_api}', total_memory={self.total_memory})")


def get_device_properties(device=None):
    _lazy_init()
    i = _index(device)
    return _DeviceProperties(i, _C._device_info(i))


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


#===--- streams and events (one in-order stream per device) ---===#

class Stream(torch.Stream):
    def __new__(cls, device=None, priority=0, **kwargs):
        return torch.Stream.__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)


class _EventType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "tpu"


class Event(metaclass=_EventType):
    """A torch.Event on tpu. It is a plain torch.Event (PyTorch's
    elapsed_time and wait take no subclass of it), made on the current
    device; isinstance(e, torch.tpu.Event) holds for every tpu event."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(device=torch.device("tpu", current_device()),
                           enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def current_stream(device=None):
    return torch.Stream(device=torch.device("tpu", _index(device)))


default_stream = current_stream


class StreamContext:
    """Work queued inside runs on the device's one in-order stream, as all
    work does; kept so that code written for torch.cuda runs."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def stream(s) -> StreamContext:
    return StreamContext(s)


def set_stream(stream) -> None:
    """Nothing to set: one in-order stream per device."""
