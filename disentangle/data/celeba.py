"""CelebA (Liu et al. 2015), aligned faces with 40 binary attributes: ``data.name: celeba``.

Source: the official project page http://mmlab.ie.cuhk.edu.hk/projects/CelebA.html, whose Google
Drive folder holds ``Img/img_align_celeba.zip`` (202,599 aligned and cropped faces, JPEGs of
178×218), ``Anno/list_attr_celeba.txt`` and ``Eval/list_eval_partition.txt``. ``data.path`` is a
folder holding the images, as the folder ``img_align_celeba/`` (the zip extracted) **or** the
archive ``img_align_celeba.zip`` itself (read in place; the folder wins when both are there), and
the two text files (beside them, or in ``Anno/`` and ``Eval/`` as on the Drive). Left unset,
``data.path`` is ``<cache root>/celeba`` (``$DISENTANGLE_DATA`` or ``~/.cache/disentangle``), where
:func:`download_celeba` puts the files (``data.download: true`` runs it when they are missing).

The text files, in their official format:

* ``list_attr_celeba.txt``: the number of images on the first line, the 40 attribute names on the
  second, then one line per image, ``000001.jpg -1  1  1 -1 ...`` (columns separated by one or more
  spaces, values 1 or -1). The labels are the 40 attributes as binary classes, 1 → 1 and -1 → 0
  (as torchvision's ``CelebA`` maps them), named by the official names (``5_o_Clock_Shadow`` ...
  ``Young``).
* ``list_eval_partition.txt``: ``000001.jpg 0`` per image, 0 train (162,770 images), 1 valid
  (19,867), 2 test (19,962); only read when ``split`` is not ``"all"``.

A malformed line, an image without an attribute row, a selected row without its image, or a file
of the partition without an attribute row is one error naming the file and line.

**The crop** (``crop: center``, the default): the centre ``crop_size`` × ``crop_size`` square of
the 178×218 image, box ``((178 - c) // 2, (218 - c) // 2)`` plus ``c`` (for ``c = 140``:
left 19, top 39, right 159, bottom 179), resized to ``image_size`` × ``image_size`` with Lanczos
(Pillow's ``LANCZOS``, formerly ``ANTIALIAS``). With ``crop_size: 140`` this is, pixel box and
filter, the "closecrop" of the WAE code (github.com/tolstikhin/wae, ``datahandler.py``
``_read_celeba_image``; its comment says DCGAN, pytorch-gan-collection and AVB use it), which the
RAE code prescribes (ParthaEth/Regularized_autoencoders-RAE-, README: "Centre crop 140X140 and
resize to 64X64") and many later PyTorch VAEs write as torchvision's ``CenterCrop(140)`` +
``Resize(64)``; AntixK/PyTorch-VAE uses ``CenterCrop(148)`` (``crop_size: 148``).

``crop: none`` resizes the whole image to ``image_size`` × ``image_size`` without keeping its
aspect ratio. That is what the widely used unofficial PyTorch reimplementations of the
disentanglement models do: 1Konny/Beta-VAE and 1Konny/FactorVAE (``transforms.Resize((64, 64))``
on the full image) and YannDubs/disentangling-vae (``img.resize((64, 64), Image.ANTIALIAS)`` in
its ``preprocess``; the centre-crop code there is not applied to CelebA, and where it is called
its result is discarded). The preprocessing of the β-VAE (Higgins et al. 2017) and FactorVAE
(Kim & Mnih 2018) papers themselves could not be checked here: no code of theirs was found
among the public sources searched, and their text was not at hand. The default is the 140 crop because it keeps the face's aspect ratio
and is the most common choice in the published code read for this loader; use ``crop: none`` to
match the reimplementations above.

Decoding shares :mod:`disentangle.data.image_folder`'s code (EXIF orientation, modes, Lanczos) and
its cache: the decoded stack of a (split, max_images, image_size, crop, crop_size) selection is
written once to ``<cache>/celeba/`` (``data.cache``), keyed by the selected file names, their
sizes and modification times (or the archive's), and reused while they are unchanged. The labels
are parsed from the text file on every build (about a second for the full file).
"""
from __future__ import annotations

import os
import threading
import urllib.error
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._core import checks
from ..errors import (
    ChecksumMismatchError,
    CorruptDataFileError,
    DataFileNotFoundError,
    DataPathNotFoundError,
    ParameterError,
)
from . import DATASETS
from .download import RemoteFile, default_cache_dir, download_url, require_path
from .image_folder import (
    IMAGE_EXTENSIONS,
    CacheFiles,
    Decoded,
    _bytes_opener,
    _path_opener,
    cache_folder,
    cache_key,
    cached_decode,
    check_image_size,
    crop_and_resize,
    decode_images,
    memory_mapped,
    place_images,
    source_prefix,
)
from .samples import SampleDataset, choose_placement

PROJECT_PAGE = "http://mmlab.ie.cuhk.edu.hk/projects/CelebA.html"
DRIVE_FOLDER = "https://drive.google.com/drive/folders/0B7EVK8r0v71pWEZsZE9oNnFzTm8"
IMAGES_FOLDER = "img_align_celeba"
IMAGES_ZIP = "img_align_celeba.zip"
ATTRIBUTES_FILE = "list_attr_celeba.txt"
PARTITION_FILE = "list_eval_partition.txt"
#: the size of the aligned images
ALIGNED_SIZE = (178, 218)
SPLITS = {"train": 0, "valid": 1, "test": 2}
CROPS = ("center", "none")


def _drive(file_id: str) -> str:
    # the direct-download form of a Google Drive file; confirm=t skips the page that asks to
    # confirm downloading a file too large to scan for viruses
    return f"https://drive.usercontent.google.com/download?id={file_id}&export=download&confirm=t"


_PROVENANCE = (
    "Google Drive file ids of the official CelebA folder and md5 checksums as listed in torchvision's "
    "torchvision/datasets/celeba.py (CelebA.file_list)"
)
#: the files :func:`download_celeba` fetches (the ids and md5s of torchvision's ``CelebA.file_list``)
CELEBA_FILES = (
    RemoteFile(_drive("0B7EVK8r0v71pZjFTYXZWM3FlRnM"), IMAGES_ZIP, "celeba",
               "md5:00d2c5bc6d35e252742224ab0c1e8fcb", provenance=_PROVENANCE),
    RemoteFile(_drive("0B7EVK8r0v71pblRyaVFSWGxPY0U"), ATTRIBUTES_FILE, "celeba",
               "md5:75e246fa4810816ffd6ee81facbd244c", provenance=_PROVENANCE),
    RemoteFile(_drive("0B7EVK8r0v71pY0NSMzRuSXJEVkk"), PARTITION_FILE, "celeba",
               "md5:d32c9cbf5e040fd4025c592c306e6668", provenance=_PROVENANCE),
)

_GET = (
    f"Get {IMAGES_ZIP} (Img/), {ATTRIBUTES_FILE} (Anno/) and {PARTITION_FILE} (Eval/) from the official page "
    f"{PROJECT_PAGE} (Google Drive folder {DRIVE_FOLDER}), or run "
    "python -c 'from disentangle.data.celeba import download_celeba; download_celeba()' to download them "
    "into the cache."
)
_EXPECTED = (
    f"data.path for celeba names a folder holding {IMAGES_FOLDER}/ (the extracted JPEGs) or {IMAGES_ZIP}, "
    f"and {ATTRIBUTES_FILE} and {PARTITION_FILE} (beside them or in Anno/ and Eval/). {_GET}"
)


# ---------------------------------------------------------------------------- download
def download_celeba(root: str | os.PathLike | None = None, *, progress: bool = True) -> Path:
    """Download the aligned CelebA images (``img_align_celeba.zip``, 1.4 GB) and the attribute and
    partition files into ``root`` (default ``<cache root>/celeba``, where ``data.path`` unset
    looks) and return ``root``. Files already there are kept (the zip is not fetched when its
    extracted ``img_align_celeba/`` folder is there). Each download is streamed to a
    temporary file, checked against torchvision's md5 and renamed into place
    (:func:`disentangle.data.download.download_url`); the zip is read in place by the loader, not
    extracted.

    The files live on Google Drive, which limits how often a file may be downloaded per day and
    may answer with an HTML page instead of the file: that fails the checksum and is discarded,
    and the error says how to get the files by hand. (These URLs could not be tried where this
    code was written, which had no internet access.)
    """
    folder = Path(root).expanduser() if root is not None else default_cache_dir() / "celeba"
    for remote in CELEBA_FILES:
        target = folder / remote.filename
        if target.is_file() or (remote.filename == IMAGES_ZIP and (folder / IMAGES_FOLDER).is_dir()):
            continue
        try:
            download_url(remote.url, target, remote.checksum, progress=progress)
        except ChecksumMismatchError as err:  # Google Drive's quota or warning page instead of the file
            raise ChecksumMismatchError(
                f"{err} Google Drive answers so when a file was downloaded too often that day; get "
                f"{remote.filename} by hand from {PROJECT_PAGE} (Google Drive folder {DRIVE_FOLDER}) and put it at "
                f"exactly {target}."
            ) from err
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise DataFileNotFoundError(
                f"The CelebA file {remote.filename} could not be downloaded from {remote.url} "
                f"({type(err).__name__}: {err}). Google Drive often refuses popular files for a day; get it by "
                f"hand from {PROJECT_PAGE} (Google Drive folder {DRIVE_FOLDER}) and put it at exactly {target}, "
                "or point data.path to a folder holding the CelebA files."
            ) from err
    return folder


# ---------------------------------------------------------------------------- the text files
def _find(root: Path, name: str, subfolder: str) -> Path | None:
    for candidate in (root / name, root / subfolder / name):
        if candidate.is_file():
            return candidate
    return None


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="strict").splitlines()
    except UnicodeDecodeError as err:
        raise CorruptDataFileError(
            f"{path} is not a text file ({err}); it is not CelebA's {path.name}. Get it again: {_GET}"
        ) from None
    except OSError as err:
        raise CorruptDataFileError(f"{path} could not be read ({type(err).__name__}: {err}).") from err


def _shown(line: str) -> str:
    return repr(line if len(line) <= 80 else line[:77] + "...")


def read_attributes(path: Path) -> tuple[list[str], tuple[str, ...], np.ndarray, list[int]]:
    """``(file names, attribute names, classes (N, K) int64 in {0, 1}, line numbers)`` of
    ``list_attr_celeba.txt`` (module docstring: the format); a file that breaks it raises one
    paragraph naming the line."""
    lines = _lines(path)
    fix = f"The file is truncated, edited or not CelebA's {ATTRIBUTES_FILE}; get it again: {_GET}"
    if len(lines) < 2:
        raise CorruptDataFileError(
            f"{path} has {len(lines)} line(s); {ATTRIBUTES_FILE} starts with the number of images and a line of "
            f"attribute names. {fix}"
        )
    try:
        announced = int(lines[0].strip())
    except ValueError:
        raise CorruptDataFileError(
            f"{path} line 1 is {_shown(lines[0])}; it must be the number of images. {fix}"
        ) from None
    names = tuple(lines[1].split())
    if not names or any(token.lstrip("-").isdigit() for token in names):
        raise CorruptDataFileError(
            f"{path} line 2 is {_shown(lines[1])}; it must be the attribute names (5_o_Clock_Shadow ... Young). {fix}"
        )
    k = len(names)
    allowed = {"1", "-1"}
    files: list[str] = []
    chunks: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines[2:], 3):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != k + 1 or not allowed.issuperset(tokens[1:]):
            raise CorruptDataFileError(
                f"{path} line {number} is {_shown(line)}; every line after the two header lines must be an image "
                f"file name and {k} values, each 1 or -1, separated by spaces. {fix}"
            )
        if tokens[0] in seen:
            raise CorruptDataFileError(
                f"{path} line {number} repeats {tokens[0]}, already on line {seen[tokens[0]]}. {fix}"
            )
        seen[tokens[0]] = number
        files.append(tokens[0])
        chunks.append("".join(tokens[1:]).replace("-1", "0"))
    if len(files) != announced:
        raise CorruptDataFileError(
            f"{path} announces {announced:,} images on line 1 but has {len(files):,} rows. {fix}"
        )
    if not files:
        raise CorruptDataFileError(f"{path} has no image rows. {fix}")
    classes = (np.frombuffer("".join(chunks).encode("ascii"), dtype=np.uint8) - ord("0")).reshape(len(files), k)
    return files, names, classes.astype(np.int64), [seen[name] for name in files]


def read_partition(path: Path) -> dict[str, tuple[int, int]]:
    """``{file name: (partition 0/1/2, line number)}`` of ``list_eval_partition.txt``."""
    fix = f"The file is truncated, edited or not CelebA's {PARTITION_FILE}; get it again: {_GET}"
    out: dict[str, tuple[int, int]] = {}
    for number, line in enumerate(_lines(path), 1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 2 or tokens[1] not in ("0", "1", "2"):
            raise CorruptDataFileError(
                f"{path} line {number} is {_shown(line)}; every line must be an image file name and its partition, "
                f"0 (train), 1 (valid) or 2 (test). {fix}"
            )
        if tokens[0] in out:
            raise CorruptDataFileError(
                f"{path} line {number} repeats {tokens[0]}, already on line {out[tokens[0]][1]}. {fix}"
            )
        out[tokens[0]] = (int(tokens[1]), number)
    if not out:
        raise CorruptDataFileError(f"{path} has no lines. {fix}")
    return out


# ---------------------------------------------------------------------------- the images
def _is_image(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return not base.startswith(".") and os.path.splitext(base)[1].lower() in IMAGE_EXTENSIONS


def _images_folder(root: Path) -> Path | None:
    """The extracted ``img_align_celeba/``: in ``root``, or in ``root/Img/`` (the Drive folder's
    layout, extracted in place); in either, the folder one level down when the archive was
    extracted into a folder of its own name (``img_align_celeba/img_align_celeba/``, Kaggle's)."""
    for folder in (root / IMAGES_FOLDER, root / "Img" / IMAGES_FOLDER):
        if not folder.is_dir():
            continue
        nested = folder / IMAGES_FOLDER
        if nested.is_dir() and not any(_is_image(e.name) for e in os.scandir(folder) if e.is_file()):
            return nested
        return folder
    return None


class _Images:
    """The JPEGs of ``img_align_celeba/`` or ``img_align_celeba.zip``, by file name."""

    def __init__(self, root: Path) -> None:
        folder = _images_folder(root)
        archive = _find(root, IMAGES_ZIP, "Img")
        self.zip: zipfile.ZipFile | None = None
        if folder is not None:
            self.source = folder
            with os.scandir(folder) as entries:
                self.members = {e.name: e.name for e in entries if _is_image(e.name)}
        elif archive is not None:
            self.source = archive
            try:
                self.zip = zipfile.ZipFile(archive)
                infos = self.zip.infolist()
            except (zipfile.BadZipFile, OSError, EOFError) as err:
                raise CorruptDataFileError(
                    f"{archive} could not be read as a zip archive ({type(err).__name__}: {err}); it is probably "
                    f"truncated or corrupt. Delete it and get it again: {_GET}"
                ) from err
            self.members = {
                info.filename.rsplit("/", 1)[-1]: info.filename
                for info in infos
                if not info.is_dir() and not info.filename.startswith("__MACOSX/") and _is_image(info.filename)
            }
        else:
            raise DataPathNotFoundError(
                f"The CelebA folder given by data.path, {root}, has neither {IMAGES_FOLDER}/ nor {IMAGES_ZIP}. "
                f"{_EXPECTED}"
            )
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}  # a folder's file sizes, as fingerprint read them

    def fingerprint(self, names: list[str]) -> list[Any]:
        """What keys the cache: the archive's size and times, or each selected file's. The status-change
        time too, as an image folder's key has it: a file rewritten with its size and modification time
        kept (``cp -p``, ``rsync -a``) changes it, so its cached pixels are not reused."""
        if self.zip is not None:
            stat = self.source.stat()
            return [self.source.name, int(stat.st_size), int(stat.st_mtime_ns), int(stat.st_ctime_ns)]
        out = []
        for name in names:
            stat = (self.source / name).stat()
            self._sizes[name] = int(stat.st_size)
            out.append([name, int(stat.st_size), int(stat.st_mtime_ns), int(stat.st_ctime_ns)])
        return out

    def sizes(self, names: Sequence[str]) -> tuple[int, ...]:
        """Each named image's size in bytes (in the archive: uncompressed), for content_identity; a
        folder's files as :meth:`fingerprint` read them (one ``stat`` a file per build)."""
        if self.zip is not None:
            return tuple(int(self.zip.getinfo(self.members[name]).file_size) for name in names)
        return tuple(self._sizes[name] if name in self._sizes else int((self.source / name).stat().st_size)
                     for name in names)

    def opener(self, name: str):
        if self.zip is None:
            return _path_opener(self.source / name)
        archive, member = self.zip, self.members[name]
        return _bytes_opener(lambda: archive.read(member), self._lock)

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()


# ---------------------------------------------------------------------------- the dataset
def _check_params(
    *, split: Any = "all", image_size: Any = 64, crop: Any = "center", crop_size: Any = 140,
    max_images: Any = None, **_: Any,
) -> None:
    """The value checks of ``celeba`` that need no file (config time)."""
    checks.choice("split", split, ("train", "valid", "test", "all"))
    check_image_size(image_size)
    checks.choice("crop", crop, CROPS)
    checks.integer("crop_size", crop_size)
    if not 1 <= crop_size <= min(ALIGNED_SIZE):
        raise ParameterError(
            "crop_size", f"crop_size must be between 1 and {min(ALIGNED_SIZE)} (the aligned images are "
                         f"{ALIGNED_SIZE[0]}×{ALIGNED_SIZE[1]}), got {crop_size!r}. 140 is the usual crop for 64×64 "
                         "faces (148 in some code); crop: none resizes the whole image instead."
        )
    if max_images is not None:
        checks.positive_int("max_images", max_images)


def _transform(crop: str, crop_size: int, size: int):
    if crop == "none":
        return lambda image: crop_and_resize(image, (0, 0, *image.size), size)

    def center(image: Any) -> Any:
        width, height = image.size
        if width < crop_size or height < crop_size:
            raise ValueError(f"the image is {width}×{height}, smaller than the crop of {crop_size}×{crop_size}")
        left, top = (width - crop_size) // 2, (height - crop_size) // 2
        return crop_and_resize(image, (left, top, left + crop_size, top + crop_size), size)

    return center


@DATASETS.register("celeba")
def celeba(
    path: str | None = None,
    *,
    split: Literal["train", "valid", "test", "all"] = "all",
    image_size: int = 64,
    crop: Literal["center", "none"] = "center",
    crop_size: int = 140,
    max_images: int | None = None,
    cache: str | None = None,
    skip_unreadable: bool = False,
    download: bool = False,
    placement: Literal["auto", "device", "stream"] = "auto",
    device: str = "cpu",
) -> SampleDataset:
    """CelebA's aligned faces with their 40 binary attributes as labels.

    ``path``: the folder of the CelebA files (module docstring; default ``<cache root>/celeba``).
    ``split``: ``train``, ``valid``, ``test`` (the official partition) or ``all``. ``image_size``:
    the side of the stored squares. ``crop``: ``center`` (the ``crop_size`` square at the centre,
    140 by default, then resized) or ``none`` (the whole image resized, aspect not kept).
    ``max_images``: only the first N images of the split by file name (quick tries). ``cache``:
    the folder of the decoded cache (default ``<cache root>/celeba``). ``skip_unreadable``: leave
    out (with a warning) images that cannot be decoded, and their labels, instead of failing.
    ``download``: run :func:`download_celeba` into ``path`` (or the default folder) when files are missing.
    ``placement``: ``device``, ``stream`` or ``auto``, as for ``image_folder``
    (:func:`~disentangle.data.samples.choose_placement`). ``device``: where the images live. The result is a labelled
    :class:`~disentangle.data.SampleDataset` (metrics of (code, label) pairs run on it) with
    ``files`` (the file name of each image, in order) and ``path``.
    """
    _check_params(split=split, image_size=image_size, crop=crop, crop_size=crop_size, max_images=max_images)
    size = int(image_size)
    skip_unreadable = checks.boolean("skip_unreadable", skip_unreadable)
    download = checks.boolean("download", download)
    root = default_cache_dir() / "celeba" if path is None else Path(path).expanduser()
    if download:
        lacking = (
            _find(root, ATTRIBUTES_FILE, "Anno") is None
            or (split != "all" and _find(root, PARTITION_FILE, "Eval") is None)
            or (_images_folder(root) is None and _find(root, IMAGES_ZIP, "Img") is None)  # as _Images finds them
        )
        if lacking:  # into data.path when given (configs/celeba.yaml gives one), else the cache
            download_celeba(root)
    if path is None:
        if not root.is_dir():
            raise DataPathNotFoundError(
                f"CelebA is not in the cache ({root}) and data.path is unset. Point data.path to a folder of the "
                f"CelebA files, or set data.download: true to download them there. {_GET}"
            )
    else:
        root = require_path(path, what="CelebA folder", option="data.path", expected=_EXPECTED, kind="folder").absolute()

    attributes = _find(root, ATTRIBUTES_FILE, "Anno")
    if attributes is None:
        raise DataPathNotFoundError(
            f"The CelebA folder {root} has no {ATTRIBUTES_FILE} (looked beside the images and in Anno/). {_EXPECTED}"
        )
    partition_file = None
    if split != "all":
        partition_file = _find(root, PARTITION_FILE, "Eval")
        if partition_file is None:
            raise DataPathNotFoundError(
                f"The CelebA folder {root} has no {PARTITION_FILE} (looked beside the images and in Eval/), which "
                f"split={split!r} needs (split: all does not). {_EXPECTED}"
            )
    images = _Images(root)
    try:
        return _build(root, images, attributes, partition_file, split=split, size=size, crop=crop,
                      crop_size=int(crop_size), max_images=max_images, cache=cache,
                      skip_unreadable=skip_unreadable, device=device,
                      placement=checks.choice("placement", placement, ("auto", "device", "stream")))
    finally:
        images.close()


celeba.validate_params = _check_params  # type: ignore[attr-defined]  # config-time value checks


def _build(
    root: Path, images: _Images, attributes: Path, partition_file: Path | None, *, split: str, size: int,
    crop: str, crop_size: int, max_images: int | None, cache: str | None, skip_unreadable: bool, device: str,
    placement: str = "auto",
) -> SampleDataset:
    files, attribute_names, classes, line_numbers = read_attributes(attributes)
    row = {name: i for i, name in enumerate(files)}
    unlabelled = sorted(set(images.members) - row.keys())
    if unlabelled:
        shown = ", ".join(unlabelled[:5]) + (f" and {len(unlabelled) - 5} more" if len(unlabelled) > 5 else "")
        raise CorruptDataFileError(
            f"{len(unlabelled):,} images of {images.source} have no row in {attributes}: {shown}. The image files and "
            f"the attribute file do not belong together; use the official {IMAGES_ZIP} with its {ATTRIBUTES_FILE}."
        )
    if partition_file is not None:
        partition = read_partition(partition_file)
        for name, (_, number) in partition.items():
            if name not in row:
                raise CorruptDataFileError(
                    f"{partition_file} line {number} names {name}, which has no row in {attributes}. The two files do "
                    f"not belong together; get both again: {_GET}"
                )
        missing = [name for name in files if name not in partition]
        if missing:
            raise CorruptDataFileError(
                f"{attributes} line {line_numbers[row[missing[0]]]} names {missing[0]}, which is not in {partition_file} "
                f"({len(missing):,} such rows), so its split is unknown. Get both files again: {_GET}"
            )
        selected = sorted(name for name in files if partition[name][0] == SPLITS[split])
    else:
        selected = sorted(files)
    if max_images is not None:
        selected = selected[: int(max_images)]
    if not selected:
        raise CorruptDataFileError(f"The {split} split of {partition_file} is empty; it holds no image of CelebA.")
    absent = [name for name in selected if name not in images.members]
    if absent:
        shown = ", ".join(f"{name} (line {line_numbers[row[name]]})" for name in absent[:5])
        more = f" and {len(absent) - 5} more" if len(absent) > 5 else ""
        raise DataPathNotFoundError(
            f"{len(absent):,} images named in {attributes} are not in {images.source}: {shown}{more}. The images are "
            f"incomplete (an interrupted extraction or download?); get {IMAGES_ZIP} again: {_GET}"
        )

    what = f"CelebA ({images.source})"
    fix = "Get the images again, or set data.skip_unreadable: true to leave them out with a warning."
    settings = {
        "dataset": "celeba", "split": split, "max_images": max_images, "image_size": size, "crop": crop,
        "crop_size": crop_size if crop == "center" else None,
    }
    key = cache_key({**settings, "files": selected, "source": images.fingerprint(selected)})
    store = CacheFiles(cache_folder(cache, "celeba"), source_prefix(images.source, f"celeba-{split}", settings), key)
    transform = _transform(crop, crop_size, size)

    def build(into: Path | None) -> Decoded:
        items = [(name, images.opener(name)) for name in selected]
        return decode_images(items, transform, size, 3, what=what, skip_unreadable=skip_unreadable, fix=fix,
                             into=into)

    # memory-mapped until the placement is known: a split larger than memory is never read into it
    decoded = cached_decode(store, size, build, what=what, skip_unreadable=skip_unreadable, fix=fix,
                            mmap=placement != "device")
    placed, reason = choose_placement(placement, decoded.images.nbytes, device)
    if placed == "stream":
        decoded = memory_mapped(store, size, decoded)
    labels = classes[[row[name] for name in decoded.names]]
    dataset = SampleDataset(
        place_images(decoded.images, placed == "stream", device), labels, attribute_names,
        label_sizes=(2,) * len(attribute_names), name=f"CelebA {split} ({root})", stream=placed == "stream",
    )
    dataset.placement_reason = reason
    dataset.files = tuple(decoded.names)
    dataset.file_sizes = images.sizes(decoded.names)  # content_identity
    dataset.skipped = tuple(decoded.skipped)
    dataset.split = split
    dataset.path = str(root)
    dataset.cache_file = str(store.array)
    return dataset
