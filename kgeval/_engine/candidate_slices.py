"""Where a query/candidate scorer reads its candidate slices from: in place, from a memory-mapped file whose pages
are let go once a slice is counted, or copied from host memory to the device a slice at a time.

- :class:`InPlaceSlices`: the table lives on the device that computes (the usual case): a slice is a view.
- :class:`MappedFileSlices`: a CPU table backed by a shared file mapping (``numpy.memmap`` of mode "r" / "r+",
  ``torch.from_file(shared=True)``) and larger than :data:`RELEASE_MEMORY_FRACTION` of the memory available
  (:func:`available_memory`): a slice is a view, mapped in one call (``MADV_POPULATE_READ``) while the next one is
  read ahead (``MADV_WILLNEED``), and its pages are handed back to the kernel (``madvise(MADV_DONTNEED)``, safe for
  shared file mappings only: their contents stay in the file and the page cache) when the next slice starts, so
  the resident set holds about one slice of the table whatever its size. A smaller mapped table is read in place
  and its pages left to the kernel, which drops clean file pages itself under memory pressure. Checked, not
  assumed: the mapping is looked up in ``/proc/self/maps`` (Linux); anything else -- anonymous memory, a private
  copy-on-write mapping, another system -- is read in place and never released.
- :class:`GatheredSlices`: a candidate whitelist over a table that :class:`MappedFileSlices` would release: each
  slice's rows are gathered when it is counted (a copy of one slice, on the computing device) and the pages of the
  table rows it spans released after, so a whitelist never copies the table either.
- :class:`StreamedSlices`: the table lives in host memory (pinned, or a memory-mapped file) while the queries are
  on an accelerator: each slice is copied to the device when it is counted, never the whole table; on CUDA the
  next slice is copied on a side stream while the current one is counted (overlapped when the table is pinned).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys

import torch

#: CPU tables smaller than this are never released (their pages cost little, re-reading them costs time)
RELEASE_MIN_BYTES = 64 * 2**20
#: a mapped table is released slice by slice when it is larger than this fraction of the memory available to the
#: process (the machine's, or its cgroup's if lower): re-mapping the pages of every slice at every pass costs time
#: (10M x 64 float32, 300 tasks: 14.2 s kept, 16.1 s released), worth it only where the table crowds the memory
RELEASE_MEMORY_FRACTION = 0.5

#: bytes of candidate vectors one streamed slice may hold on the device
STREAM_SLICE_BYTES = 256 * 2**20

#: madvise advice: drop the pages from this process (shared file mappings re-read them from the page cache)
MADV_DONTNEED = 4
#: madvise advice: read the pages ahead, asynchronously
MADV_WILLNEED = 3
#: madvise advice (Linux >= 5.14): map the pages now, in one call
MADV_POPULATE_READ = 22


class InPlaceSlices:
    """Slices of a table on the computing device: views."""

    streams = False

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table

    def slice(self, start: int, stop: int) -> torch.Tensor:
        """Rows [start, stop) of the table, on the computing device."""
        return self.table[start:stop]


class MappedFileSlices(InPlaceSlices):
    """Slices of a CPU table backed by a shared file mapping: views, whose pages are released once counted."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(table)
        self._previous: tuple[int, int] | None = None
        self.released_bytes = 0  #: bytes handed back so far (for tests and benchmarks)

    def slice(self, start: int, stop: int) -> torch.Tensor:
        if self._previous != (start, stop):
            if self._previous is not None:
                self.release(*self._previous)
            self._advise(start, stop, MADV_POPULATE_READ)  # map the slice in one call, not a fault per page
            self._advise(stop, 2 * stop - start, MADV_WILLNEED)  # and start reading the next one from disk
        self._previous = (start, stop)
        return self.table[start:stop]

    def release(self, start: int, stop: int) -> None:
        """Hand the whole pages inside rows [start, stop) back to the kernel."""
        self.released_bytes += self._advise(start, stop, MADV_DONTNEED)

    def _advise(self, start: int, stop: int, advice: int) -> int:
        """madvise the whole pages inside rows [start, stop) (clipped to the table); the bytes advised (0 when the
        call failed, e.g. an advice this kernel does not know)."""
        stop = min(stop, self.table.shape[0])
        row_bytes = self.table.stride(0) * self.table.element_size()
        begin = self.table.data_ptr() + start * row_bytes
        end = self.table.data_ptr() + stop * row_bytes
        page = mmap.PAGESIZE
        first, last = -(-begin // page) * page, end // page * page  # whole pages inside the rows only
        if last > first and _madvise(first, last - first, advice):
            return last - first
        return 0


class StreamedSlices:
    """Slices of a host table copied to ``device`` one at a time, the next one prefetched on a side stream (CUDA).

    Parameters
    ----------
    table : Tensor of shape (n, d), on the CPU (pinned for overlapped copies)
    device : torch.device
        Where the queries are and the scores are computed.
    """

    streams = True

    def __init__(self, table: torch.Tensor, device: torch.device) -> None:
        self.table, self.device = table, device
        self._overlap = device.type == "cuda" and table.is_pinned()
        self._side = torch.cuda.Stream(device) if self._overlap else None
        self._prefetched: dict[tuple[int, int], tuple[torch.Tensor, object]] = {}
        self.copied_rows = 0  #: rows copied to the device so far (for tests and benchmarks)
        self.prefetch_hits = 0

    def slice(self, start: int, stop: int) -> torch.Tensor:
        """Rows [start, stop) on the device (prefetched or copied now); the next rows of the same width are
        prefetched."""
        ready = self._prefetched.pop((start, stop), None)
        if ready is not None:
            rows, event = ready
            torch.cuda.current_stream(self.device).wait_event(event)  # type: ignore[arg-type]
            rows.record_stream(torch.cuda.current_stream(self.device))  # freed only after the compute used it
            self.prefetch_hits += 1
        else:
            self._prefetched.clear()  # a guess that missed: let its memory go
            rows = self._copy(start, stop)
        width = stop - start
        following = (stop, min(stop + width, self.table.shape[0]))
        if self._side is not None and following[1] > following[0]:
            with torch.cuda.stream(self._side):
                copied = self._copy(*following)
                event = torch.cuda.Event()
                event.record(self._side)
            self._prefetched[following] = (copied, event)
        return rows

    def _copy(self, start: int, stop: int) -> torch.Tensor:
        self.copied_rows += stop - start
        return self.table[start:stop].to(self.device, non_blocking=self._overlap)


class GatheredSlices(MappedFileSlices):
    """Slices of a sorted candidate whitelist over a CPU table backed by a large shared file mapping.

    Parameters
    ----------
    table : Tensor of shape (n, d), on the CPU, in a shared file mapping
    rows : LongTensor of shape (k,)
        The whitelist: sorted table rows; candidate position p is table row ``rows[p]``.
    device : torch.device
        Where the slices are used (a GPU gets each gathered slice copied, never the table).
    """

    def __init__(self, table: torch.Tensor, rows: torch.Tensor, device: torch.device) -> None:
        super().__init__(table)
        self.rows, self.device = rows.cpu(), device
        self.streams = device != table.device
        self.gathered_rows = 0  #: rows gathered so far (for tests)

    def slice(self, start: int, stop: int) -> torch.Tensor:
        """The whitelist's rows at positions [start, stop), gathered; the table rows of the previous slice are
        released first."""
        if self._previous is not None:
            self.release(*self._previous)
        rows = self.rows[start:stop]
        self._previous = (int(rows[0]), int(rows[-1]) + 1) if rows.numel() else None
        self.gathered_rows += rows.numel()
        return self.table.index_select(0, rows).to(self.device)

    def take(self, start: int, stop: int) -> torch.Tensor:
        """The whitelist's rows at positions [start, stop), gathered on the CPU, nothing released (for checks)."""
        return self.table.index_select(0, self.rows[start:stop])


def streamed_slice_rows(table: torch.Tensor) -> int:
    """The most rows of ``table`` one streamed slice holds: :data:`STREAM_SLICE_BYTES` of vectors (at least 1)."""
    return max(1, STREAM_SLICE_BYTES // max(1, table.shape[1] * table.element_size()))


def candidate_slices(
    table: torch.Tensor, device: torch.device, rows: torch.Tensor | None = None
) -> InPlaceSlices | StreamedSlices:
    """How to read slices of ``table`` for scores computed on ``device`` (see the module docstring); ``rows``
    (sorted table rows of a candidate whitelist) only where :func:`releases_pages` holds for the table."""
    if rows is not None:
        return GatheredSlices(table, rows, device)
    if table.device != device:
        if table.device.type != "cpu":
            raise ValueError(
                f"model.kgeval_candidates returned a table on {table.device}, but the model is evaluated on {device}: "
                "the table must live on the model's device or in host memory (streamed a slice at a time)"
            )
        return StreamedSlices(table, device)
    if device.type == "cpu" and releases_pages(table):
        return MappedFileSlices(table)
    return InPlaceSlices(table)


def releases_pages(table: torch.Tensor) -> bool:
    """Whether a table's pages are released slice by slice when read on the CPU: a contiguous CPU table of at least
    :data:`RELEASE_MIN_BYTES` in a shared file mapping, larger than :data:`RELEASE_MEMORY_FRACTION` of the memory
    available (:func:`available_memory`; unknown counts as too little)."""
    size = table.numel() * table.element_size()
    if table.device.type != "cpu" or size < RELEASE_MIN_BYTES or not table.is_contiguous():
        return False
    if not shared_file_mapping(table):
        return False
    available = available_memory()
    return available is None or size > available * RELEASE_MEMORY_FRACTION


def shared_file_mapping(table: torch.Tensor) -> bool:
    """Whether the CPU tensor's memory lies entirely inside one shared mapping of a file (``/proc/self/maps``,
    Linux; False elsewhere or when the maps cannot be read)."""
    if not sys.platform.startswith("linux") or table.numel() == 0:
        return False
    begin = table.data_ptr()
    end = begin + table.numel() * table.element_size()  # contiguous (checked by the caller)
    try:
        with open(f"/proc/{os.getpid()}/maps") as maps:
            for line in maps:
                fields = line.split()
                low, high = (int(value, 16) for value in fields[0].split("-"))
                if low <= begin < high:
                    inode, shared = int(fields[4]), fields[1][3] == "s"
                    return end <= high and shared and inode != 0
    except (OSError, ValueError, IndexError):
        return False
    return False


def available_memory() -> int | None:
    """Bytes of memory this process may still fill: the machine's ``MemAvailable`` (``/proc/meminfo``), or less when
    its cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) leaves less; None where none can be read."""
    found = []
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
        with open("/proc/self/cgroup") as cgroups:
            entries = [line.rstrip("\n").split(":", 2) for line in cgroups]
    except (OSError, ValueError, IndexError):
        return min(found) if found else None
    for _number, controllers, path in entries:
        if controllers == "":  # v2
            files = (f"/sys/fs/cgroup{path}/memory.max", f"/sys/fs/cgroup{path}/memory.current")
        elif "memory" in controllers.split(","):
            base = f"/sys/fs/cgroup/memory{path}"
            files = (f"{base}/memory.limit_in_bytes", f"{base}/memory.usage_in_bytes")
        else:
            continue
        try:
            with open(files[0]) as limit_file, open(files[1]) as usage_file:
                limit, usage = limit_file.read().strip(), usage_file.read().strip()
        except OSError:
            continue
        if limit.isdigit() and usage.isdigit():
            found.append(max(0, int(limit) - int(usage)))
    return min(found) if found else None


def _madvise(address: int, length: int, advice: int) -> bool:
    """libc's madvise on [address, address + length); True when it succeeded."""
    libc = _libc()
    if libc is None:
        return False
    return libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(length), ctypes.c_int(advice)) == 0


_LIBC: list[object] = []


def _libc() -> ctypes.CDLL | None:
    """The C library (memoised; None where it cannot be loaded)."""
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]  # type: ignore[return-value]
