"""The command line with the user's files: never overwritten, never half written.

An --output that is one of the command's inputs is refused before anything
is read; a result is written beside its target and renamed only once whole,
so that a failure (a full disk, an error in a block) leaves no file that
looks like output and an earlier file as it was; out-of-core inputs that are
bad (labels, a truncated file, a folder as output) end in one clear error.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from skprior._cli import main

pytest.importorskip("dask")

N, K = 80, 4


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(K), size=N)
    labels = rng.integers(0, K, size=N)
    np.save(tmp_path / "p.npy", proba)
    np.save(tmp_path / "y.npy", labels)
    np.save(tmp_path / "z.npy", np.log(proba) + 1.0)
    return tmp_path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _bytes(path):
    return Path(path).read_bytes()


IN_MEMORY = [[], ["--out-of-core"]]


@pytest.mark.parametrize("extra", IN_MEMORY)
@pytest.mark.parametrize(
    ("command", "argv", "victim"),
    [
        ("can", ["p.npy", "--prior", "1,1,1,1"], "p.npy"),
        ("can", ["p.npy", "--prior-from-labels", "y.npy"], "y.npy"),
        (
            "adapt",
            ["p.npy", "--prior-from-labels", "y.npy", "--labels", "y.npy"],
            "y.npy",
        ),
        (
            "can",
            ["p.npy", "--prior", "1,1,1,1", "--reference", "z.npy", "--logits"],
            "z.npy",
        ),
        ("calibrate", ["z.npy", "--logits", "--fit-labels", "y.npy"], "z.npy"),
        ("calibrate", ["z.npy", "--logits", "--fit-labels", "y.npy"], "y.npy"),
    ],
)
def test_output_that_is_an_input_is_refused_before_reading(
    folder, capsys, monkeypatch, command, argv, victim, extra
):
    """--output naming an input, by any path to it, leaves the input intact."""
    monkeypatch.chdir(folder)
    before = _bytes(victim)
    for name in (victim, f"./{victim}", str(folder / victim)):
        code, _, err = run(capsys, command, *argv, *extra, "-o", name)
        assert code == 2, err
        assert "would destroy" in err and "Traceback" not in err
        assert _bytes(victim) == before


def test_hard_link_to_an_input_is_refused(folder, capsys):
    os.link(folder / "p.npy", folder / "same.npy")
    code, _, err = run(
        capsys, "can", folder / "p.npy", "--prior", "1,1,1,1", "-o", folder / "same.npy"
    )
    assert code == 2 and "would destroy" in err


@pytest.mark.parametrize("extra", IN_MEMORY)
def test_failed_write_leaves_no_output(folder, capsys, monkeypatch, extra):
    """A write that fails part-way (a full disk) leaves no file named --output,
    and an existing file as it was; the error says so (exit 2)."""
    from skprior._utils import _npy_blocks

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    np.save(folder / "old.npy", np.zeros(3))
    old = _bytes(folder / "old.npy")
    # (in memory: numpy's writer; out of core: the block writer)
    monkeypatch.setattr(np.lib.format, "write_array", full_disk)
    monkeypatch.setattr(_npy_blocks.NpyRowWriter, "__setitem__", full_disk)
    argv = ["can", folder / "p.npy", "--prior", "1,1,1,1", *extra, "-o"]
    code, _, err = run(capsys, *argv, folder / "new.npy")
    assert code == 2 and "No space left" in err and "Traceback" not in err
    assert not (folder / "new.npy").exists()
    code, _, err = run(capsys, *argv, folder / "old.npy")
    assert code == 2 and _bytes(folder / "old.npy") == old
    # (nothing left behind, not even the hidden temporary)
    assert sorted(p.name for p in folder.iterdir()) == [
        "old.npy",
        "p.npy",
        "y.npy",
        "z.npy",
    ]


def test_out_of_core_write_is_complete_and_keeps_the_mode(folder, capsys):
    target = folder / "out.npy"
    target.write_bytes(b"old")
    target.chmod(0o640)
    argv = ["can", folder / "p.npy", "--prior", "1,1,1,1", "--out-of-core"]
    assert run(capsys, *argv, "-o", target)[0] == 0
    in_memory = folder / "in_memory.npy"
    assert run(capsys, *argv[:-1], "-o", in_memory)[0] == 0
    np.testing.assert_allclose(np.load(target), np.load(in_memory), rtol=1e-12)
    assert target.stat().st_mode & 0o777 == 0o640


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("extra", IN_MEMORY)
def test_full_device_is_an_error(folder, capsys, extra):
    """Written to /dev/full (through a link named .npy), the command fails."""
    (folder / "full.npy").symlink_to("/dev/full")
    argv = ["can", folder / "p.npy", "--prior", "1,1,1,1", *extra]
    code, _, err = run(capsys, *argv, "-o", folder / "full.npy")
    assert code == 2 and "No space left" in err and "Traceback" not in err


def test_full_stdout_is_an_error(folder, capsys, monkeypatch):
    """The printed prior going nowhere is an error, not a silent success."""
    import sys

    class Full:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Full())
    code = main(["adapt", str(folder / "p.npy"), "--prior", "1,1,1,1", "-q"])
    assert code == 2
    assert "No space left" in capsys.readouterr().err


def test_zarr_output_never_deletes_other_files(folder, capsys):
    """An existing .zarr folder that is not one array is refused untouched."""
    store = folder / "results.zarr"
    store.mkdir()
    (store / "notes.txt").write_text("mine")
    argv = ["can", folder / "p.npy", "--prior", "1,1,1,1", "--out-of-core", "-o", store]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "not a Zarr array" in err
    assert (store / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (np.full(N, K), "label 0"),
        (np.r_[np.zeros(N - 1), -1].astype(int), f"label {N - 1}"),
        (np.r_[0.5, np.zeros(N - 1)], "label 0 (counting from 0) is 0.5"),
        (np.zeros((N, 2), dtype=int), "1-D array"),
        (np.array(["cat"] * N), "dtype <U3"),
        (np.zeros(N + 1, dtype=int), f"{N + 1} labels"),
    ],
)
def test_out_of_core_bad_labels_are_clear(folder, capsys, labels, expected):
    np.save(folder / "bad.npy", labels)
    argv = ["can", folder / "p.npy", "--prior", "1,1,1,1", "--out-of-core"]
    code, _, err = run(
        capsys, *argv, "--labels", folder / "bad.npy", "-o", folder / "o.npy"
    )
    assert code == 2, err
    assert "--labels" in err and expected in err and "Traceback" not in err
    assert not (folder / "o.npy").exists()


@pytest.mark.parametrize("which", ["OUTPUTS", "--labels"])
def test_out_of_core_truncated_file_is_clear(folder, capsys, which):
    name = "p.npy" if which == "OUTPUTS" else "y.npy"
    raw = _bytes(folder / name)
    (folder / name).write_bytes(raw[: len(raw) - 100])
    argv = ["can", folder / "p.npy", "--prior", "1,1,1,1", "--out-of-core"]
    code, _, err = run(capsys, *argv, "--labels", folder / "y.npy")
    assert code == 2, err
    assert "truncated" in err and "header promises" in err and "Traceback" not in err


def test_out_of_core_output_folder_is_clear(folder, capsys):
    (folder / "out.npy").mkdir()
    argv = ["can", folder / "p.npy", "--prior", "1,1,1,1", "--out-of-core"]
    code, _, err = run(capsys, *argv, "-o", folder / "out.npy")
    assert code == 2 and "is a folder" in err


@pytest.mark.parametrize("seed", ["-1", "2.5", str(2**32)])
def test_demo_bad_seed_is_a_usage_error(capsys, seed):
    code, _, err = run(capsys, "demo", "--seed", seed)
    assert code == 2 and "not a seed" in err and "Traceback" not in err


def test_folder_results_replace_only_on_success(tmp_path):
    """The .zarr path of the atomic writer (zarr itself need not be installed):
    a folder written beside the target replaces it whole on success; on a
    failure the target is as it was and nothing is left beside it."""
    from skprior._utils._npy_blocks import replaced_atomically

    target = tmp_path / "out.zarr"
    with replaced_atomically(target, folder=True) as temporary:
        (Path(temporary) / ".zarray").write_text("new")
    assert (target / ".zarray").read_text() == "new"
    with pytest.raises(OSError), replaced_atomically(target, folder=True) as temporary:
        (Path(temporary) / ".zarray").write_text("half")
        raise OSError(28, "No space left on device")
    assert (target / ".zarray").read_text() == "new"
    with replaced_atomically(target, folder=True) as temporary:
        (Path(temporary) / "zarr.json").write_text("newer")
    assert sorted(p.name for p in target.iterdir()) == ["zarr.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zarr"]


@pytest.mark.parametrize("suffix", [".zarr", ".npy"])
def test_a_failed_lazy_write_leaves_nothing_once_its_threads_end(tmp_path, suffix):
    """A block that fails (as Ctrl-C does) reaches the calling thread only:
    Dask's pool threads went on writing the blocks they held, and a Zarr
    store removed under them was made again (a hidden partial folder left).
    The write's own threads are ended before the temporary is removed."""
    if suffix == ".zarr":
        pytest.importorskip("zarr")
    import time

    import dask.array as da

    from skprior._utils._npy_blocks import store_lazy

    def block(x, block_info=None):
        index = block_info[0]["chunk-location"][0]
        if index == 0:
            time.sleep(0.05)
            raise KeyboardInterrupt  # (what Ctrl-C raises in the thread it meets)
        time.sleep(0.3)  # (still writing when the first block fails)
        return x

    array = da.ones((8, 3), chunks=(1, 3)).map_blocks(block, dtype=float)
    with pytest.raises(KeyboardInterrupt):
        store_lazy(tmp_path / f"out{suffix}", array)
    time.sleep(0.6)  # (a thread left running would write by now)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("files", "replaced"),
    [
        ({".zarray": "{}", "0.0": "", "1.0": "", ".zattrs": "{}"}, True),
        ({"zarr.json": '{"node_type": "array"}', "c/0/0": ""}, True),
        ({"zarr.json": '{"node_type": "group"}'}, False),
        ({".zgroup": "{}", "proba/.zarray": "{}"}, False),
        ({".zarray": "{}", "0.0": "", "notes.txt": "mine"}, False),
        ({}, False),
    ],
)
def test_only_a_zarr_array_is_replaced(tmp_path, capsys, files, replaced):
    from argparse import Namespace

    from skprior._cli import _blocks

    store = tmp_path / "out.zarr"
    store.mkdir()
    for name, text in files.items():
        (store / name).parent.mkdir(parents=True, exist_ok=True)
        (store / name).write_text(text)
    args = Namespace(diagram=None, output=str(store))
    if replaced:
        _blocks._check_output(args)
    else:
        with pytest.raises(_blocks.InputError, match="not a Zarr array"):
            _blocks._check_output(args)


def test_output_zarr_holding_an_input_is_refused(folder, capsys):
    """An input inside the .zarr folder the output would replace."""
    store = folder / "out.zarr"
    store.mkdir()
    np.save(store / "p.npy", np.load(folder / "p.npy"))
    argv = ["can", store / "p.npy", "--prior", "1,1,1,1", "-o", store]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "would destroy" in err
    code, _, err = run(
        capsys, "can", folder / "p.npy", "--prior", "1,1,1,1", "-o", folder
    )
    assert code == 2 and "would destroy" not in err and "unknown file type" in err


def test_sigterm_cleans_up_like_ctrl_c(folder, capsys, monkeypatch):
    """SIGTERM (timeout, Slurm, docker stop) during a write: the hidden partial
    file is removed as on Ctrl-C, "terminated", exit 128 + 15 (the process
    died at once and left a partial file the size of the output)."""
    import signal

    from skprior._utils import _npy_blocks

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("the handler raises first")  # pragma: no cover

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(np.lib.format, "write_array", killed)
    monkeypatch.setattr(_npy_blocks.NpyRowWriter, "__setitem__", killed)
    for extra in IN_MEMORY:
        argv = ["can", folder / "p.npy", "--prior", "1,1,1,1", *extra]
        code, _, err = run(capsys, *argv, "-o", folder / "new.npy")
        assert code == 128 + signal.SIGTERM and "terminated" in err
        assert sorted(p.name for p in folder.iterdir()) == ["p.npy", "y.npy", "z.npy"]
    assert signal.getsignal(signal.SIGTERM) is before  # (restored)


def test_memory_error_is_one_clear_line(folder, capsys, monkeypatch):
    """Out of memory in memory is not "a bug": one line that names
    --out-of-core, exit 2."""
    from skprior._cli import _commands

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(_commands, "_run", no_memory)
    code, _, err = run(capsys, "can", folder / "p.npy", "--prior", "1,1,1,1")
    assert code == 2 and "--out-of-core" in err and "Traceback" not in err


def test_out_of_core_bad_row_names_the_file_row_and_fix(folder, capsys):
    """Out of core a bad row was "the rows of proba", counted from its Dask
    chunk, with the library's fix (scipy's softmax): now as in memory, the
    file, the row of the file and --logits."""
    proba = np.load(folder / "p.npy")
    proba[61] *= 2
    np.save(folder / "bad.npy", proba)
    for extra in IN_MEMORY:
        code, _, err = run(
            capsys, "can", folder / "bad.npy", "--prior", "1,1,1,1", *extra
        )
        assert code == 2, err
        assert "OUTPUTS" in err and "bad.npy" in err and "row 61 sums" in err
        assert "pass --logits" in err and "scipy" not in err


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write any file"
)
def test_read_only_existing_output_is_refused_before_the_work(folder, capsys):
    """A read-only --output failed only after the work, naming a hidden
    temporary file; it is refused first, naming the file."""
    target = folder / "kept.npy"
    np.save(target, np.zeros(3))
    target.chmod(0o444)
    for extra in IN_MEMORY:
        code, _, err = run(
            capsys, "can", folder / "p.npy", "--prior", "1,1,1,1", *extra, "-o", target
        )
        assert code == 2 and "kept.npy exists and is read-only" in err
        assert "partial" not in err
    np.testing.assert_array_equal(np.load(target), np.zeros(3))
