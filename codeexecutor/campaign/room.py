"""What one device call carries and the room it leaves: the limit of a call, the allowances
counted before a pack is made, the size of the working tree, and the fixed test samples
that travel with the data. `pack.py` (a pack in .campaign/) and `release.py` (the committed
data) both measure against these."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIMIT = 64 * 2**20  # what one device call carries, working tree included
TREE_ALLOWANCE = 16 * 2**20  # the working tree beside the pack where git cannot measure it: a little over today's
TEST_SETS = {
    "codenetmut": ("codenetmut", "errors"),
    "tutorial": ("tutorial",),
    "singleline": ("singleline",),
    "functions": ("functions", "functions_errors"),
}  # build folder -> its datasets
TEST_LIMIT = 300
WHEELS_ALLOWANCE = int(4.5 * 2**20)  # the wheels every draw carries (4.0 MB measured), counted before the download
DEEPSPEED_ALLOWANCE = int(5.2 * 2**20)  # DeepSpeed's wheels (5.1 MB), carried where the ids leave room
OTHER_ALLOWANCE = 2 * 2**20  # data.tar.xz: the tokenizer, curriculum and test samples (0.6 MB measured)


def tree_bytes(root: pathlib.Path = ROOT) -> int:
    """What travels with a device call beside the pack: tracked files and untracked ones git
    does not ignore (TREE_ALLOWANCE where git is not there to say)."""
    try:
        names = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return TREE_ALLOWANCE
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def test_samples(data: pathlib.Path, out: pathlib.Path, limit: int = TEST_LIMIT) -> dict:
    """The fixed test sample of each test set (the rows `evaluate --limit` scores), as small
    datasets in the layout of a build, stats.json beside."""
    import datasets

    from eval.evaluate import sample  # the rows `evaluate --limit` scores

    sizes = {}
    for build, names in TEST_SETS.items():
        for name in names:
            folder = data / build / name
            if not folder.is_dir():
                continue
            test = datasets.load_from_disk(str(folder))["test"]
            rows = test.select(sample(len(test), limit))
            datasets.DatasetDict({"test": rows}).save_to_disk(str(out / build / name))
            sizes[f"{build}/{name}"] = len(rows)
        if (data / build / "stats.json").exists():
            shutil.copy(data / build / "stats.json", out / build / "stats.json")
    return sizes
