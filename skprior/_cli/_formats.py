"""How the ``skprior`` command line reads each file format.

Formats, chosen by the file's extension and checked against its content (a
file whose bytes are another format's is refused with the rename to make):

``.npy``
    One array (``numpy.save``).
``.npz``
    Several named arrays (``numpy.savez``); ``key`` picks one. Without a key:
    the only array, or else the first of the default names present
    (``predictions``, ``proba``, ``logits`` for outputs; ``labels``,
    ``ground_truth``, ``y`` for labels). The key applies to .npz files only
    (the other formats hold one array), so that .npz and .npy files can be
    mixed in one command.
``.csv`` / ``.txt``
    Numbers separated by commas, or by spaces or tabs (``numpy.savetxt``'s
    default) in a file without a comma, one sample per line, no index column, UTF-8 (a
    byte-order mark is allowed) or UTF-16 with its mark. A first line is a
    header, skipped and reported, when it holds no numbers, or when it is
    pandas' default column names ``0,1,...,K-1`` over lines of floats written
    with a point. Blank lines and lines starting with ``#`` are skipped (the
    latter reported); any other line that is not all numbers, or whose
    number of values differs, is an error: no line is ever dropped silently.

Every problem raises :class:`~skprior._cli.InputError`, whose one-line
message names the option and the file, says what is wrong and how to fix it.
Messages worth seeing that are not errors (a header line skipped) go to
``note``.
"""

import re
from pathlib import Path

import numpy as np

from skprior._cli._common import InputError

OUTPUT_KEYS = ("predictions", "proba", "logits")
LABEL_KEYS = ("labels", "ground_truth", "y")
TEXT_SUFFIXES = (".csv", ".txt")
SUFFIXES = (".npy", ".npz", *TEXT_SUFFIXES)
# How the binary formats start (.npz files are zip archives).
MAGIC = {".npy": b"\x93NUMPY", ".npz": b"PK"}
# scipy.sparse.save_npz stores these arrays (and indices/indptr or row/col).
SPARSE_KEYS = {"format", "shape", "data"}
# pandas writes its default header "0,1,...,K-1" as integers and float data
# always with a point or an exponent ("1.0"); %g-style writers (numpy.savetxt
# with fmt="%g", this module) write whole floats as integers ("1"). So a first
# line "0,1,...,K-1" is pandas' header when the other lines hold a character
# no integer has and no cell that is an integer.
_NON_INTEGER = re.compile(r"[^0-9,\s+-]")
_INTEGER_CELL = re.compile(r"(?:^|,)[ \t]*[+-]?[0-9]+[ \t]*(?:,|$)", re.MULTILINE)
WRITERS = {".npy": "numpy.save(path, array)", ".npz": "numpy.savez(path, name=array)"}


def no_note(message):
    """The default ``note``: say nothing."""


def describe(option, path):
    return f"{option} {path}"


def checked_suffix(path, option):
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(
            f"{describe(option, path)}: unknown file type {suffix or '(none)'!r}; "
            f"use one of {', '.join(SUFFIXES)}."
        )
    return suffix


def _looks_like_text(head):
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        return head.startswith((b"\xff\xfe", b"\xfe\xff"))
    return all(char.isprintable() or char.isspace() for char in text)


def wrong_content(where, head, suffix):
    """The message for a file whose bytes do not match its extension."""
    if not head:
        return f"{where} is empty (0 bytes); write the array with {WRITERS[suffix]}."
    if head.startswith(MAGIC[".npy"]):
        return f"{where} is an .npy file (one array), not {suffix}; rename it to .npy."
    if head.startswith(MAGIC[".npz"]):
        return (
            f"{where} is a zip archive (as .npz files are), not {suffix}; rename it "
            f"to .npz (--key or --labels-key picks an array)."
        )
    if _looks_like_text(head):
        return (
            f"{where} holds text, not a binary {suffix} file; if it holds "
            f"comma-separated numbers, rename it to .csv."
        )
    return (
        f"{where} is not a {suffix} file (it does not start as numpy writes one); "
        f"write the array with {WRITERS[suffix]}."
    )


def _load_failure(where, exc, suffix):
    """The message for numpy's refusal of a file whose header looked right."""
    if "allow_pickle" in str(exc):
        return (
            f"{where} holds Python objects (dtype=object), which are not read "
            f"(unpickling runs code); save a numeric array: "
            f"numpy.asarray(values, dtype=float)."
        )
    return (
        f"{where} is damaged or truncated ({type(exc).__name__}: {exc}); write "
        f"it again with {WRITERS[suffix]}."
    )


def _read_numpy(path, suffix, where, key, default_keys, key_option):
    """The array of an .npy file, or the chosen one of an .npz archive."""
    with open(path, "rb") as handle:
        head = handle.read(8)  # (enough for the magic bytes of each format)
    if not head.startswith(MAGIC[suffix]):
        raise InputError(wrong_content(where, head, suffix))
    try:
        value = np.load(path, allow_pickle=False)
        if suffix == ".npz":
            with value as stored:
                names = list(stored.keys())
                key = _npz_key(names, key, default_keys, where, key_option)
                value = stored[key]
    except InputError:
        raise
    except Exception as exc:  # (any failure here is the file's: numpy's parser)
        raise InputError(_load_failure(where, exc, suffix)) from exc
    if isinstance(value, np.ndarray):
        return value
    if suffix == ".npy":
        raise InputError(wrong_content(where, head, ".npy"))
    # (numpy returns the other members of an archive as bytes)
    raise InputError(
        f"{where}: its member {key!r} is not a NumPy array (the archive was not "
        f"written by numpy.savez); write it with {WRITERS['.npz']}."
    )


def _npz_key(names, key, default_keys, where, key_option):
    if SPARSE_KEYS <= set(names):
        raise InputError(
            f"{where} holds a scipy.sparse matrix (scipy.sparse.save_npz); the "
            f"commands need dense arrays: numpy.save(path, matrix.toarray())."
        )
    if not names:
        raise InputError(f"{where} holds no arrays; write one with {WRITERS['.npz']}.")
    if key is not None:
        if key not in names:
            raise InputError(
                f"{where} has no array {key!r}; it holds {names}: fix {key_option}."
            )
        return key
    if len(names) == 1:
        return names[0]
    key = next((name for name in default_keys if name in names), None)
    if key is None:
        raise InputError(
            f"{where} holds the arrays {names}; choose one with {key_option} "
            f"(defaults tried: {', '.join(default_keys)})."
        )
    return key


# -- text files ----------------------------------------------------------------------


def _decode(raw, where):
    """The file's text: UTF-8 with or without a byte-order mark, or UTF-16."""
    try:
        if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
            return raw.decode("utf-16")
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        for suffix, magic in MAGIC.items():
            if raw.startswith(magic):
                raise InputError(
                    f"{where} is a binary {suffix} file, not text; rename it to "
                    f"{suffix}."
                ) from exc
        raise InputError(
            f"{where}: byte {exc.start} is not UTF-8 text; save the file as "
            f"'CSV UTF-8' (comma-separated numbers)."
        ) from exc


def _is_number(cell):
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _header(numbered, where, delimiter):
    """Why the first line is a header (None if it is data)."""
    number, line = numbered[0]
    cells = [cell.strip() for cell in line.split(delimiter)]
    if len(cells) > 1 and cells[0] == "" and all(cells[1:]):
        raise InputError(
            f"{where}: line {number} {line.strip()!r} starts with an empty column "
            f"name, as pandas writes for its row index: the file has an index "
            f"column. Write it with to_csv(path, index=False)."
        )
    if all(cell and not _is_number(cell) for cell in cells):
        for separator in (";", "\t"):
            if sum(map(_is_number, line.split(separator))) >= 2:
                raise InputError(
                    f"{where}: line {number} is numbers separated by {separator!r}; "
                    f"separate them with commas (a decimal point, not a comma)."
                )
        return "it holds no numbers"
    counting = [[str(i + start) for i in range(len(cells))] for start in (0, 1)]
    if cells in counting and len(numbered) > 1:
        names = f"{cells[0]}..{cells[-1]}"
        rest = "\n".join(line for _, line in numbered[1:])
        if _NON_INTEGER.search(rest) and not _INTEGER_CELL.search(rest):
            return (
                f"pandas' default column names 0..{len(cells) - 1}: the other "
                f"lines are floats written with a point"
                if cells[0] == "0"
                else f"the column names {names} (class ids): the other lines are "
                f"floats written with a point"
            )
        if len(cells) > 2:  # ("0,1" is a row of probabilities; "0,1,2" none)
            raise InputError(
                f"{where}: line {number} {line.strip()!r} looks like column names "
                f"(the classes {names}), but the other lines hold integers too, "
                f"so it could be data: remove that line (write the file with "
                f"header=False), or mark it as a comment with '#'."
            )
    return None


def _bad_line(numbered, where, what, exc, delimiter):
    """The message for the first line that is not as many numbers as the first."""
    fix = (
        "labels are class indices 0..m-1 (the column numbers of the outputs), one "
        "per line"
        if what == "labels"
        else "every line holds the same number of comma-separated numbers, and "
        "nothing else"
    )
    width = first = None
    for number, line in numbered:
        cells = line.split(delimiter)
        for position, cell in enumerate(cells, start=1):
            if not _is_number(cell):
                separator = next((s for s in (";", "\t") if s in line), None)
                hint = (
                    f" (this line is separated by {separator!r}: use commas)"
                    if separator
                    else ""
                )
                return (
                    f"{where}: line {number}, value {position}: {cell.strip()!r} "
                    f"is not a number{hint}; {fix}."
                )
        if width is None:
            width, first = len(cells), number
        elif len(cells) != width:
            return (
                f"{where}: line {number} has {len(cells)} values but line {first} "
                f"has {width}; {fix}."
            )
    return f"{where} cannot be read as comma-separated numbers ({exc}); {fix}."


def _read_text(path, where, note, what):
    text = _decode(Path(path).read_bytes(), where)
    lines = list(enumerate(text.splitlines(), start=1))
    comments = [number for number, line in lines if line.lstrip()[:1] == "#"]
    # (the data: every line that is neither blank nor a comment)
    numbered = [item for item in lines if item[1].strip()[:1] not in ("", "#")]
    if comments:
        shown = ", ".join(map(str, comments[:5])) + (", ..." if comments[5:] else "")
        note(
            f"{where}: skipped {len(comments)} comment line(s) starting with '#' "
            f"(line {shown})."
        )
    if not numbered:
        raise InputError(f"{where} holds no data lines; {_EMPTY_FIX[what]}.")
    # Commas, or else any whitespace (numpy.savetxt's default is a space).
    delimiter = "," if any("," in line for _, line in numbered) else None
    reason = _header(numbered, where, delimiter)
    if reason is not None:
        number, line = numbered.pop(0)
        shown = line.strip()[:60]
        note(f"{where}: line {number} {shown!r} read as a header, not data ({reason}).")
        if not numbered:
            raise InputError(
                f"{where} holds a header line but no data lines; {_EMPTY_FIX[what]}."
            )
    try:
        array = np.loadtxt(
            [line for _, line in numbered],
            delimiter=delimiter,
            dtype=np.float64,
            comments=None,
            ndmin=2,
        )
    except ValueError as exc:
        raise InputError(_bad_line(numbered, where, what, exc, delimiter)) from exc
    _refuse_index_column(array, where)
    return array[:, 0] if array.shape[1] == 1 else array


_EMPTY_FIX = {
    "outputs": "write one row of numbers per sample",
    "labels": "write one label per line",
    "prior": "write one weight per class",
}


def _refuse_index_column(array, where):
    """A first column 0, 1, 2, ... (or 1, 2, 3, ...) is pandas' row index."""
    n_rows = array.shape[0]
    if n_rows >= 3 and array.shape[1] >= 2:
        for start in (0, 1):
            if np.array_equal(array[:, 0], np.arange(start, start + n_rows)):
                raise InputError(
                    f"{where}: the first column is {start}, {start + 1}, ..., "
                    f"{start + n_rows - 1}, a row index, not data. pandas writes "
                    f"one unless told not to: to_csv(path, index=False)."
                )


# -- the readers of the commands -----------------------------------------------------


def read_array(
    path,
    *,
    option,
    key=None,
    key_option="--key",
    default_keys=OUTPUT_KEYS,
    note=no_note,
    what="outputs",
):
    """Read one array from ``path`` (.npy, .npz or .csv/.txt).

    ``option`` names the command-line argument in messages; ``note`` receives
    the messages about skipped lines.
    """
    where = describe(option, path)
    suffix = checked_suffix(path, option)
    if Path(path).is_dir():
        raise InputError(f"{where} is a folder; pass a file.")
    if not Path(path).is_file():
        raise InputError(f"{where}: no such file; check the path.")
    try:
        if suffix in MAGIC:
            return _read_numpy(path, suffix, where, key, default_keys, key_option)
        return _read_text(path, where, note, what)
    except OSError as exc:
        raise InputError(f"{where} cannot be read ({exc}).") from exc
