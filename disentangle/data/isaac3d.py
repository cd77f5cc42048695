"""Isaac3D (Nie et al. 2020), NVIDIA's high-resolution robot-arm renders: ``data.name: isaac3d``.

Source: https://github.com/NVlabs/High-res-disentanglement-datasets (README and
``dataset_demo.py`` read at commit ``6233714``; CC BY 4.0). 737,280 renders at 512×512 of a
kitchen scene with a robot arm and an object, every combination of nine factors, each "uniformly
sampled in the normalized range of variations [0, 1]", in this (row-major, last fastest) order:

==================  =====  =========================================================
name                size   what
==================  =====  =========================================================
object_shape        3      the object's shape
robot_x_move        8      the arm's horizontal movement
robot_y_move        5      the arm's vertical movement
camera_height       4      camera height
object_scale        4      object scale
lighting_intensity  4      light intensity
lighting_y_dir      6      light direction
object_color        4      object colour
wall_color          4      wall colour
==================  =====  =========================================================

The values are the normalised ``k / (size − 1)`` of the labels file (as third-party code reads
them; not checked on the real file here).

**The order, and a discrepancy in the README.** The README lists the factors as object_shape (3),
object_scale (4), camera_height (4), robot_x-movement (8), robot_y-movement (5),
lighting_intensity (4), lighting_y-dir (6), object_color (4), wall_color (4) and gives the image
index as ``object_shape·245760 + object_scale·30720 + camera_height·6144 + robot_x·1536 +
robot_y·384 + lighting_intensity·96 + lighting_y·16 + object_color·4 + wall_color``. Those strides
do not fit those sizes (``object_scale·30720`` would leave room for 8 values of it, not 4). The same
repository's ``dataset_demo.py`` uses ``factor_sizes = [3, 8, 5, 4, 4, 4, 6, 4, 4]`` with the names
``object_shape, robot_x-move, robot_y-move, camera_height, object_scale, lighting_intensity,
lighting_y-dir, object_color, wall_color`` and derives its strides from them (245760, 30720, 6144,
1536, 384, 96, 16, 4, 1: the README's numbers); so do a semi-StyleGAN data loader found by code
search (its repository was not identified) and the third-party loaders found (tfds builders,
ituvisionlab/FactorQVAE ``data/isaac3d.py``). That self-consistent order is
the one used here. The loader does not trust it blindly: it derives each factor's classes from the
labels file and checks that they form the complete row-major grid, so the sizes and their order
are verified by value against the publisher's labels (on the real file; the tests check the logic
on tiny files). Which of two 4-valued columns is camera height and which object scale cannot be
told from the labels; that naming rests on ``dataset_demo.py``.

**Files.** The README links the full 512×512 set (190 GB) and "a downsampled version (resolution
128x128)", ``Isaac3D_128x128`` (13 GB), both on Google Drive, without checksums or exact sizes; this
loader downloads the 128×128 one. Third-party loaders read it (zip) as ``Isaac3D_down128/`` with
``images/000000.png`` … and ``labels.npy``, a NumPy array ``(737280, 9)`` of the normalised factor
values (the semi-StyleGAN loader mentioned above reads ``labels.npy`` beside ``images/`` for a
full-size folder too). Reading, resizing (``image_size``, default 128, Lanczos) and the cache work as for
``falcor3d`` (:mod:`disentangle.data.falcor3d`). In memory: 737,280 × 3 × 128² bytes = 36 GB at
128 (9.1 GB at 64); ``model.backbone: conv128`` takes the default size.
"""
from __future__ import annotations

from . import DATASETS
from .celeba import _drive
from .download import RemoteFile
from .falcor3d import HighResGridDataset

FACTOR_NAMES = (
    "object_shape", "robot_x_move", "robot_y_move", "camera_height", "object_scale",
    "lighting_intensity", "lighting_y_dir", "object_color", "wall_color",
)
FACTOR_SIZES = (3, 8, 5, 4, 4, 4, 6, 4, 4)
#: Google Drive ids of the README's links
DRIVE_ID_128 = "1OmQ1G2wnm6eTsSFGTKFZZAh5D3nQTW1B"
DRIVE_ID_FULL = "1vFkgK4CpHpCOBOU7l07yocrqAqr2uDox"

ISAAC3D_FILE = RemoteFile(
    url=_drive(DRIVE_ID_128),
    filename="Isaac3D_down128.zip",
    subdir="isaac3d",
    checksum=None,
    provenance=(
        "Google Drive id of the README's 'Isaac3D_128x128 (13 GB)' link "
        f"(https://drive.google.com/uc?export=download&id={DRIVE_ID_128}); no checksum or exact size published, "
        "checked by structure only (zip, labels grid, image names)"
    ),
)


@DATASETS.register("isaac3d")
class Isaac3D(HighResGridDataset):
    """Isaac3D, 737,280 robot-arm renders in a 3×8×5×4×4×4×6×4×4 grid, ``image_size`` ×
    ``image_size`` RGB (default 128) on ``device`` as uint8 (36 GB at 128).

    ``path``, ``image_size``, ``cache_dir``, ``download``, ``strict`` and ``device`` as for
    ``falcor3d`` (:class:`~disentangle.data.falcor3d.HighResGridDataset`); the module docstring
    says what the files hold and where the factor order comes from.
    """

    files = (ISAAC3D_FILE,)
    factor_names = FACTOR_NAMES
    official_sizes = FACTOR_SIZES
    labels_file = "labels.npy"
    archive_folder = "Isaac3D_down128"
    full_resolution_url = f"https://drive.google.com/uc?export=download&id={DRIVE_ID_FULL}"
    what = "Isaac3D archive"
