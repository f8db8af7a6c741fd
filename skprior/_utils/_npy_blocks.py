""".npy and .zarr files larger than memory, as Dask arrays.

A stored output of 1e8 rows x 1,000 classes is 400 GB: it is read as a Dask
array whose chunks are row blocks, and a result is written block by block,
so that the memory in use is a few chunks whatever the file size. Dask
schedules the blocks (threads on one machine, or a ``dask.distributed``
cluster); nothing here schedules anything.

A .npy file is read with positioned reads (``os.pread``) at the offsets that
its header gives, not through ``np.load(mmap_mode="r")``: the pages of a
memory map count in the process's resident memory until the kernel reclaims
them, so a pass over a mapped 28 GB file shows a resident size of the whole
page cache, while a read holds only the chunks in flight. The file is opened
per read, so that the array pickles to the workers of a cluster.
"""

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

# Chunks of about 128 MB: large enough that per-task overhead is small next
# to reading them, small enough that a few per thread fit in any memory.
CHUNK_BYTES = 128 * 2**20


def _need_dask():
    try:
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - the dask extra installs it
        raise ImportError(
            "Out-of-core processing needs Dask: pip install 'skprior[dask]'."
        ) from exc
    return da


def _transfer(path, flags, move, buffer, position):
    """Read or write all of ``buffer`` at byte ``position`` of the file ``path``.

    ``move`` is ``os.preadv`` or ``os.pwritev``, which may move fewer bytes than
    asked: it is called again for the rest until the whole buffer is done.
    """
    fd = os.open(path, flags)
    try:
        done = 0
        while done < len(buffer):
            moved = move(fd, [buffer[done:]], position + done)
            if moved <= 0:
                raise OSError(f"{path}: file ended early")
            done += moved
    finally:
        os.close(fd)


class NpyRows:
    """The rows of a C-ordered .npy file, read on demand (``x[rows, cols]``).

    It has ``shape``, ``dtype`` and ``ndim``, which is all that
    ``dask.array.from_array`` needs.
    """

    def __init__(self, path):
        self.path = str(path)
        with open(self.path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(handle)
            offset = handle.tell()
        if fortran or len(shape) not in (1, 2):
            raise ValueError(
                f"{path}: out-of-core reading needs a C-ordered 1-D or 2-D array, "
                f"got shape {shape} (fortran order: {fortran})."
            )
        self._describe(shape, dtype, offset)
        # (a file cut short, by a full disk or a killed copy, would otherwise
        # fail deep inside a pass, at its first missing block)
        size, expected = os.path.getsize(path), offset + self.row_bytes * shape[0]
        if size < expected:
            raise ValueError(
                f"{path} is truncated: its header promises {shape[0]} rows "
                f"({expected} bytes) but the file holds {size} bytes; write it "
                f"again with numpy.save(path, array)"
            )

    def _describe(self, shape, dtype, offset):
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)
        self.row_bytes = self.dtype.itemsize * int(np.prod(self.shape[1:]))
        self.offset = offset

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        rows = key[0]
        start, stop, step = rows.indices(self.shape[0])
        n_rows = max(0, stop - start)
        out = np.empty((n_rows, *self.shape[1:]), dtype=self.dtype)
        if n_rows:
            buffer = memoryview(out.reshape(-1).view(np.uint8))
            position = self.offset + start * self.row_bytes
            _transfer(self.path, os.O_RDONLY, os.preadv, buffer, position)
        out = out[::step] if step != 1 else out
        return out[(slice(None), *key[1:])] if len(key) > 1 else out


def chunk_rows(n_columns, itemsize):
    """Rows per chunk of about :data:`CHUNK_BYTES`."""
    return max(1, CHUNK_BYTES // max(1, n_columns * itemsize))


def open_lazy(path, rows=None):
    """A .npy or .zarr file as a Dask array chunked by rows."""
    da = _need_dask()
    if Path(path).suffix.lower() == ".zarr":
        array = da.from_zarr(str(path))
        if array.ndim == 2:
            per_chunk = rows or chunk_rows(array.shape[1], array.dtype.itemsize)
            array = array.rechunk({0: per_chunk, 1: -1})
        return array
    source = NpyRows(path)
    if source.ndim == 1:
        return da.from_array(source, chunks=(rows or 2**24,))
    per_chunk = rows or chunk_rows(source.shape[1], source.dtype.itemsize)
    return da.from_array(source, chunks=(per_chunk, -1), asarray=False)


class NpyRowWriter(NpyRows):
    """A new .npy file written by row blocks (``x[rows, :] = block``).

    For ``dask.array.store``: positioned writes, no memory map.
    """

    def __init__(self, path, shape, dtype):
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": tuple(shape),
        }
        self.path = str(path)
        with open(self.path, "wb") as handle:
            np.lib.format.write_array_header_2_0(handle, header)
            size = np.dtype(dtype).itemsize * int(np.prod(shape))
            if Path(path).is_file():  # (not a device, which has no size)
                handle.truncate(handle.tell() + size)
            self._describe(shape, dtype, handle.tell())

    def __setitem__(self, key, block):
        rows = key[0] if isinstance(key, tuple) else key
        data = np.ascontiguousarray(block, dtype=self.dtype).reshape(-1)
        view = memoryview(data.view(np.uint8))
        position = self.offset + rows.indices(self.shape[0])[0] * self.row_bytes
        _transfer(self.path, os.O_WRONLY, os.pwritev, view, position)


def _umask_mode():
    """The mode a new file gets (0o666 less the process's umask)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def replaced_atomically(path, folder=False):
    """A new file (or, with ``folder``, folder) beside ``path``, renamed to it.

    The block writes the path it is given; when it ends without an exception
    the result replaces ``path`` (``os.replace``, atomic for a file: a reader
    sees the old file or the whole new one), and when it fails -- an error, a
    full disk, an interrupt -- the temporary is removed and ``path`` is left
    as it was. A killed process leaves at most a hidden ``.NAME.*.partial``
    beside it, never a file that looks like a result. A symbolic link is
    followed (its target is replaced), and a target that is neither a file
    nor a folder (a device, a pipe) is written in place, since nothing can be
    renamed onto it.
    """
    target = os.path.realpath(path)
    if os.path.exists(target) and not (os.path.isfile(target) or os.path.isdir(target)):
        yield target
        return
    head, name = os.path.split(target)
    options = dict(dir=head, prefix=f".{name}.", suffix=f".partial{Path(name).suffix}")
    if folder:
        temporary = tempfile.mkdtemp(**options)
    else:
        handle, temporary = tempfile.mkstemp(**options)
        os.close(handle)
        mode = os.stat(target).st_mode if os.path.isfile(target) else _umask_mode()
        os.chmod(temporary, mode & 0o7777)
    remove = shutil.rmtree if folder else os.remove
    try:
        yield temporary
        if folder and os.path.isdir(target):  # (a folder cannot be replaced)
            aside = tempfile.mkdtemp(**options)
            os.replace(target, os.path.join(aside, name))
            os.replace(temporary, target)
            shutil.rmtree(aside)
        else:
            os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            remove(temporary)
        raise


def store_lazy(path, array):
    """Compute the Dask ``array`` and write it to ``path`` (.npy or .zarr).

    Block by block, as the blocks are computed, into a temporary beside
    ``path`` that replaces it only once every block is written
    (:func:`replaced_atomically`). An existing .zarr ``path`` is replaced as
    a whole: the caller checks that it holds one array and nothing else.
    """
    _need_dask()
    zarr = Path(path).suffix.lower() == ".zarr"
    with replaced_atomically(path, folder=zarr) as temporary:
        if zarr:
            _compute_in_own_threads(
                array.to_zarr(temporary, overwrite=True, compute=False)
            )
            return
        import dask.array as da

        writer = NpyRowWriter(temporary, array.shape, array.dtype)
        _compute_in_own_threads(da.store(array, writer, lock=False, compute=False))


def _compute_in_own_threads(task):
    """Compute the Dask ``task`` in threads of its own, all ended when it ends.

    An error or an interrupt reaches the calling thread only, and Dask's
    shared pool threads went on writing the blocks they held: a Zarr store
    removed under them was made again by their writes (a hidden partial
    folder left after Ctrl-C). This pool is shut down -- the blocks being
    written finished, the others dropped -- before the caller cleans up.
    """
    from concurrent.futures import ThreadPoolExecutor

    import dask

    pool = ThreadPoolExecutor(os.cpu_count() or 1)
    try:
        dask.compute(task, scheduler="threads", pool=pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
