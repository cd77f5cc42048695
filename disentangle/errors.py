"""Every error the library raises on purpose, in one place.

Each message is meant for the user: what is wrong, the valid choices, how to fix it. The CLIs print
it without a traceback. The kinds, by what went wrong:

* **bad input** (:class:`ConfigError` and its subclasses, :class:`RunExistsError`): a config key,
  a name, a value or a folder that cannot be used as given;
* **bad data**, a file on disk (:class:`CheckpointError`, :class:`DataFileNotFoundError`,
  :class:`CorruptDataFileError`, :class:`WeightsError`, :class:`ZooFileError`,
  :class:`ManifestError`);
* **a failed run** (:class:`NonFiniteLossError`, :class:`GradientMismatchError`).
"""
from __future__ import annotations


class DisentangleError(Exception):
    """Base of the errors whose message is meant for the user (the CLIs print it, no traceback)."""


# ---------------------------------------------------------------------- bad input
class ConfigError(DisentangleError, ValueError):
    """A user-facing configuration problem. Its message says what is wrong and how to fix it."""


class UnknownNameError(ConfigError, KeyError):
    """Raised for a name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would repr() the message, quotes and all
        return str(self.args[0]) if self.args else ""


class ParameterError(ConfigError):
    """A bad parameter value; ``parameter`` names it so callers can add their section prefix."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


class RunExistsError(DisentangleError):
    """The output folder already holds a run and ``resume`` was not requested."""


# ---------------------------------------------------------------------- bad data
class CheckpointError(DisentangleError):
    """No readable checkpoint: the message names the file(s) and what was wrong with each."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """The checkpoint file (or run folder) does not exist."""


class DataFileNotFoundError(DisentangleError, FileNotFoundError):
    """A dataset file is missing and could not be downloaded; the message says how to get it."""


class CorruptDataFileError(DisentangleError, ValueError):
    """A dataset file exists but is not a valid file of the expected format."""


class ChecksumMismatchError(CorruptDataFileError):
    """A downloaded (or checked) file does not have the published checksum."""


class OversizeDownloadError(DisentangleError, ValueError):
    """A download that announced or sent more bytes than allowed (``max_bytes``); it was stopped."""


class ManifestError(DisentangleError):
    """A zoo manifest that cannot be read or has an invalid entry."""


class WeightsError(DisentangleError):
    """A weight file that cannot be used: unreadable, not a zoo file, or a hash mismatch."""


class HashMismatchError(WeightsError):
    """A file's sha256 is not the one its manifest records; it is never loaded."""


class ZooFileError(DisentangleError):
    """A pretrained file that is unavailable (offline, no source, every download failed) or corrupt."""


class ZooOversizeDownloadError(ZooFileError, OversizeDownloadError):
    """A zoo download that announced or sent more bytes than the manifest's ``size``; it was stopped."""


# ---------------------------------------------------------------------- a failed run
class NonFiniteLossError(DisentangleError):
    """A loss became NaN or infinite; the last good checkpoint is kept."""


class GradientMismatchError(DisentangleError):
    """A parameter had a gradient on some ranks and none on others in the same step."""
