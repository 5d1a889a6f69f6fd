"""`Memory`: the flat global address space a kernel sees, backed by numpy arrays the caller maps into it.

Lane accesses gather and scatter bytes, so unaligned accesses and accesses at the very end of a buffer touch exactly the
bytes they name (a 16- or 32-bit load reads the next dword only when the value straddles into it).
"""

import numpy as np

from .errors import MemoryFaultError

PAGE = 0x1000
FIRST_ADDRESS = 0x1_0000_0000


class Memory:
    """A sparse flat address space: `map(array)` places a numpy array at an address; loads and stores write through to it."""

    def __init__(self) -> None:
        self.regions: list[tuple[int, int, np.ndarray]] = []  # (base, end, uint8 view), sorted by base
        self._next = FIRST_ADDRESS
        self._bases = np.zeros(0, np.uint64)
        self._last: tuple[int, int, np.ndarray] = (0, 0, np.zeros(0, np.uint8))

    def map(self, array: np.ndarray, address: int | None = None) -> int:
        """Map a C-contiguous numpy array at `address` (or the next free page-aligned address); return the address."""
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            raise MemoryFaultError("Memory.map needs a C-contiguous numpy array; pass np.ascontiguousarray(x)")
        data = array.reshape(-1).view(np.uint8)
        base = self._next if address is None else address
        end = base + data.size
        for other_base, other_end, _ in self.regions:
            if base < other_end and other_base < end:
                raise MemoryFaultError(f"mapping at {base:#x}..{end:#x} overlaps the region at {other_base:#x}; pick another address")
        self.regions.append((base, end, data))
        self.regions.sort(key=lambda region: region[0])
        self._bases = np.array([r[0] for r in self.regions], np.uint64)
        self._next = max(self._next, (end + 2 * PAGE - 1) // PAGE * PAGE)
        return base

    def alloc(self, nbytes: int, dtype: type = np.uint8) -> tuple[int, np.ndarray]:
        """Allocate and map a zeroed buffer of `nbytes`; return (address, array)."""
        array = np.zeros(max(1, -(-nbytes // np.dtype(dtype).itemsize)), dtype)
        return self.map(array), array

    def _region(self, lo: int, hi: int) -> tuple[int, np.ndarray]:
        base, end, data = self._last
        if base <= lo and hi <= end:
            return base, data
        i = int(np.searchsorted(self._bases, np.uint64(lo), side="right")) - 1
        if i >= 0:
            base, end, data = self.regions[i]
            if hi <= end:
                self._last = (base, end, data)
                return base, data
        raise MemoryFaultError(f"memory access {lo:#x}..{hi:#x} is outside every mapped region; map the buffer with Memory.map")

    def read(self, address: int, nbytes: int) -> np.ndarray:
        """Bytes at a flat address (a copy)."""
        base, data = self._region(address, address + nbytes)
        return data[address - base:address - base + nbytes].copy()

    def write(self, address: int, payload: bytes | np.ndarray) -> None:
        """Store bytes at a flat address."""
        raw = np.frombuffer(bytes(payload), np.uint8) if isinstance(payload, bytes | bytearray) else np.asarray(payload).reshape(-1).view(np.uint8)
        base, data = self._region(address, address + raw.size)
        data[address - base:address - base + raw.size] = raw

    def gather(self, addresses: np.ndarray, nbytes: int) -> np.ndarray:
        """(len(addresses), nbytes) uint8: the bytes at each address."""
        if addresses.size == 0:
            return np.zeros((0, nbytes), np.uint8)
        lo, hi = int(addresses.min()), int(addresses.max())
        try:
            base, data = self._region(lo, hi + nbytes)
        except MemoryFaultError:
            return self._gather_split(addresses, nbytes)
        offsets = (addresses - np.uint64(base)).astype(np.int64)
        return data[offsets[:, None] + np.arange(nbytes)]

    def load_dwords(self, addresses: np.ndarray, words: int) -> np.ndarray | None:
        """(words, len(addresses)) uint32 for dword-aligned addresses inside one region, or None (use `gather`)."""
        if addresses.size == 0 or int(np.bitwise_or.reduce(addresses)) & 3:
            return None
        lo, hi = int(addresses.min()), int(addresses.max()) + 4 * words
        try:
            base, data = self._region(lo, hi)
        except MemoryFaultError:
            return None
        if base & 3 or data.size & 3:
            return None
        index = (addresses - np.uint64(base)) >> np.uint64(2)
        data32 = data.view(np.uint32)
        if words == 1:
            return data32[index][None, :]
        return data32[index[None, :] + np.arange(words, dtype=np.uint64)[:, None]]

    def _gather_split(self, addresses: np.ndarray, nbytes: int) -> np.ndarray:
        out = np.zeros((addresses.size, nbytes), np.uint8)
        for i, address in enumerate(addresses.tolist()):
            out[i] = self.read(address, nbytes)
        return out

    def scatter(self, addresses: np.ndarray, payload: np.ndarray) -> None:
        """Store row i of the (n, nbytes) uint8 `payload` at addresses[i]; later lanes win on overlap, as in lane order."""
        if addresses.size == 0:
            return
        nbytes = payload.shape[1]
        lo, hi = int(addresses.min()), int(addresses.max())
        try:
            base, data = self._region(lo, hi + nbytes)
        except MemoryFaultError:
            for i, address in enumerate(addresses.tolist()):
                self.write(address, payload[i])
            return
        offsets = (addresses - np.uint64(base)).astype(np.int64)
        data[offsets[:, None] + np.arange(nbytes)] = payload
