"""The dataset registry: ``path = fetch("cora")`` gives a local folder of verified files.

Every dataset is declared once, in ``datasets.json`` beside this module: its files with their
sha256 and the original public URL of each, its licence, its citation and the notebooks that
use it. ``fetch(name)`` resolves each file in this order:

1. ``data/<name>/<file>``, the project's own copy (checked again; a corrupt copy is deleted);
2. the folder named by ``MLSYSREPRO_DATA_MIRROR`` (read-only; CI points it at ``../shared/datasets``);
3. the file's source URL, unless ``MLSYSREPRO_OFFLINE=1``.

Whatever the source, a file is copied to a temporary name inside ``data/<name>/``, checked
against its sha256 and only then renamed into place: a file that fails the check raises
:class:`ChecksumError` (naming the file, the expected and the actual hash) and is never left
in ``data/``. Libraries such as PyG may then write ``processed/`` beside the raw files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import paths

MIRROR_ENV = "MLSYSREPRO_DATA_MIRROR"
OFFLINE_ENV = "MLSYSREPRO_OFFLINE"
REGISTRY_FILE = Path(__file__).with_name("datasets.json")
_CHUNK = 1 << 20


class DatasetError(RuntimeError):
    """A dataset is unknown or could not be found anywhere."""


class ChecksumError(DatasetError):
    """A file's sha256 differs from the registry's."""


@dataclass(frozen=True)
class FileEntry:
    sha256: str
    size: int
    url: str | None


@dataclass(frozen=True)
class Dataset:
    """One registered dataset; ``files`` maps a path inside the dataset folder to its entry."""

    name: str
    title: str
    mirror: str  # folder name inside the mirror
    licence: str
    citation: str
    used_by: tuple[str, ...]
    notes: str
    files: Mapping[str, FileEntry]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_registry(path: Path = REGISTRY_FILE) -> dict[str, Dataset]:
    """Read a registry file (``datasets.json`` format) into :class:`Dataset` objects."""
    raw = json.loads(Path(path).read_text())
    return {
        name: Dataset(
            name=name,
            title=d["title"],
            mirror=d["mirror"],
            licence=d["licence"],
            citation=d["citation"],
            used_by=tuple(d["used_by"]),
            notes=d["notes"],
            files={rel: FileEntry(**f) for rel, f in d["files"].items()},
        )
        for name, d in raw.items()
    }


def _progress_hook(desc: str, total: int):
    from .progress import progress

    bar = progress(None, desc=desc, total=total)
    bar.unit, bar.unit_scale = "B", True
    return bar


class Registry:
    """Resolves registered datasets into ``data_dir`` (see the module docstring for the order)."""

    def __init__(self, datasets: Mapping[str, Dataset], data_dir: Path):
        self.datasets = dict(datasets)
        self.data_dir = Path(data_dir)

    def dataset(self, name: str) -> Dataset:
        if name not in self.datasets:
            raise DatasetError(f"unknown dataset {name!r}; registered datasets: {sorted(self.datasets)}")
        return self.datasets[name]

    def fetch(self, name: str) -> Path:
        """Return ``data_dir/<name>`` holding every file of dataset ``name``, each verified."""
        dataset = self.dataset(name)
        target = self.data_dir / name
        for rel, entry in dataset.files.items():
            self._fetch_file(dataset, rel, entry, target / rel)
        return target

    def _fetch_file(self, dataset: Dataset, rel: str, entry: FileEntry, dest: Path) -> None:
        looked = [f"{dest} (missing)"]
        if dest.exists():
            actual = sha256_of(dest)
            if actual == entry.sha256:
                return
            dest.unlink()  # a corrupt or stale copy is never used; fetch it again below
            looked = [f"{dest} (corrupt: sha256 {actual}, expected {entry.sha256}; deleted)"]
        mirror = os.environ.get(MIRROR_ENV)
        if mirror:
            source = Path(mirror) / dataset.mirror / rel
            if source.exists():
                self._install(dest, entry, rel, lambda tmp: shutil.copyfile(source, tmp), str(source))
                return
            looked.append(f"{source} (${MIRROR_ENV}: missing)")
        else:
            looked.append(f"${MIRROR_ENV} (unset)")
        if os.environ.get(OFFLINE_ENV, "") not in ("", "0"):
            looked.append(f"download (disabled: {OFFLINE_ENV}={os.environ[OFFLINE_ENV]})")
        elif entry.url is None:
            looked.append("download (this file has no public URL; only a mirror can provide it)")
        else:
            try:
                self._install(dest, entry, rel, lambda tmp: self._download(entry, tmp, rel), entry.url)
                return
            except ChecksumError:
                raise
            except OSError as error:  # URLError and HTTPError are OSErrors
                looked.append(f"{entry.url} (download failed: {error})")
        raise DatasetError(
            f"dataset {dataset.name!r}: file {rel!r} not found. Looked in:\n  - "
            + "\n  - ".join(looked)
            + f"\nFix: set {MIRROR_ENV} to a folder holding {dataset.mirror}/{rel} "
            f"(CI uses ../shared/datasets), or allow network access (unset {OFFLINE_ENV})."
        )

    @staticmethod
    def _download(entry: FileEntry, tmp: str, rel: str) -> None:
        with urllib.request.urlopen(entry.url, timeout=60) as response, open(tmp, "wb") as out:
            bar = _progress_hook(f"download {rel}", entry.size)
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                out.write(chunk)
                bar.update(len(chunk))
            bar.close()

    @staticmethod
    def _install(dest: Path, entry: FileEntry, rel: str, write, origin: str) -> None:
        """Write via ``write(tmp)`` into a temporary file beside ``dest``, verify, then rename."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
        os.close(fd)
        try:
            write(tmp)
            actual = sha256_of(Path(tmp))
            if actual != entry.sha256:
                raise ChecksumError(
                    f"checksum mismatch for {rel!r} from {origin}: expected sha256 {entry.sha256}, got {actual}"
                )
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def default_registry() -> Registry:
    """The project's registry (``datasets.json``) resolving into ``data/``."""
    return Registry(load_registry(), paths.data_dir())


def fetch(name: str) -> Path:
    """``fetch("cora")`` -> ``data/cora/`` with every file of the dataset verified."""
    return default_registry().fetch(name)


def datasets_markdown(datasets: Mapping[str, Dataset]) -> str:
    """The table of datasets, sources and licences written into ``data/README.md``."""
    rows = ["| dataset | what | files | licence | used by | citation |", "|---|---|---|---|---|---|"]
    for d in sorted(datasets.values(), key=lambda d: d.name):
        size = sum(f.size for f in d.files.values())
        rows.append(
            f"| `{d.name}` | {d.title}. {d.notes} | {len(d.files)} ({size / 1e6:.1f} MB) | {d.licence} | "
            f"{', '.join(d.used_by)} | {d.citation} |"
        )
    return "\n".join(rows) + "\n"
