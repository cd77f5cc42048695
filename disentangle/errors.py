"""Every error the library raises on purpose, in one place.

Each message is meant for the user: what is wrong, the valid choices, how to fix it. The CLIs print
it without a traceback. The kinds, by what went wrong:

* **bad input** (:class:`InputError`: :class:`ConfigError` and its subclasses,
  :class:`RunExistsError`, :class:`CheckpointNotFoundError`, :class:`DataPathNotFoundError`): a
  config key, a name, a value, a path or a folder that cannot be used as given;
* **bad data**, a file on disk (:class:`CheckpointError`, :class:`DataFileNotFoundError`,
  :class:`CorruptDataFileError`, :class:`WeightsError`, :class:`ZooFileError`,
  :class:`ManifestError`);
* **a failed run** (:class:`NonFiniteLossError`, :class:`GradientMismatchError`).

Every command line exits with the status of its kind (:data:`EXIT_CODES`, each class's
``exit_code``): 0 done, 2 bad input, 3 bad data, 4 a failed run (or, for a sweep, some failed
runs), 130 interrupted (Ctrl-C), 1 anything else (an unexpected error: a bug, printed with its
traceback).
"""
from __future__ import annotations

from collections.abc import Sequence

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_BAD_DATA = 3
EXIT_RUN_FAILED = 4
EXIT_INTERRUPTED = 130
#: every exit status of the command lines, by meaning
EXIT_CODES: dict[str, int] = {
    "done": EXIT_OK, "internal error": EXIT_INTERNAL, "bad input": EXIT_BAD_INPUT, "bad data": EXIT_BAD_DATA,
    "run failed": EXIT_RUN_FAILED, "interrupted": EXIT_INTERRUPTED,
}


class DisentangleError(Exception):
    """Base of the errors whose message is meant for the user (the CLIs print it, no traceback,
    and exit with its class's ``exit_code``)."""

    exit_code: int = EXIT_INTERNAL


# ---------------------------------------------------------------------- bad input
class InputError(DisentangleError):
    """Something the user gave cannot be used as given: a path that holds no run or table, a table
    that cannot be analysed, a folder in the way. Its message says what to give instead."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(InputError, ValueError):
    """A user-facing configuration problem. Its message says what is wrong and how to fix it."""

    exit_code = EXIT_BAD_INPUT

    @classmethod
    def all_of(cls, errors: Sequence[ConfigError], what: str = "The config") -> ConfigError:
        """One error that reports every one of ``errors`` (at least one): the error itself when
        there is one, else a :class:`ConfigError` whose one paragraph numbers them all, each with
        its own message (did-you-mean and valid choices included)."""
        if len(errors) == 1:
            return errors[0]
        listing = " ".join(f"({n}) {error}" for n, error in enumerate(errors, 1))
        return ConfigError(f"{what} has {len(errors)} problems; fix them all: {listing}")


class UnknownNameError(ConfigError, KeyError):
    """Raised for a name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would repr() the message, quotes and all
        return str(self.args[0]) if self.args else ""


class RetiredModelError(UnknownNameError):
    """A pretrained model the zoo no longer ships; the message names its replacement and how to
    retrain it (see :func:`disentangle.zoo.manifest.retire_entry`)."""


class ParameterError(ConfigError):
    """A bad parameter value; ``parameter`` names it so callers can add their section prefix."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


class NotAGridError(ConfigError):
    """Something that needs a complete factor grid (a metric that fixes a factor and draws the
    others, or one that encodes every grid point) was asked of a sample of images without one
    (:class:`disentangle.data.SampleDataset`), or labels were needed and the sample has none."""


class RunExistsError(InputError):
    """The output folder already holds a run and ``resume`` was not requested."""

    exit_code = EXIT_BAD_INPUT


# ---------------------------------------------------------------------- bad data
class CheckpointError(DisentangleError):
    """No readable checkpoint: the message names the file(s) and what was wrong with each."""

    exit_code = EXIT_BAD_DATA


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """The checkpoint file (or run folder) does not exist (a path the user gave: bad input)."""

    exit_code = EXIT_BAD_INPUT


class DataFileNotFoundError(DisentangleError, FileNotFoundError):
    """A dataset file is missing and could not be downloaded; the message says how to get it."""

    exit_code = EXIT_BAD_DATA


class DataPathNotFoundError(DataFileNotFoundError, InputError):
    """A dataset path the user gave (``data.path``, ``data.background``) does not exist, or lacks the
    file it should hold (bad input, never reported as a corrupt file); the message names the path and
    what is expected there."""

    exit_code = EXIT_BAD_INPUT


class CorruptDataFileError(DisentangleError, ValueError):
    """A dataset file exists but is not a valid file of the expected format."""

    exit_code = EXIT_BAD_DATA


class ChecksumMismatchError(CorruptDataFileError):
    """A downloaded (or checked) file does not have the published checksum."""


class OversizeDownloadError(DisentangleError, ValueError):
    """A download that announced or sent more bytes than allowed (``max_bytes``); it was stopped."""

    exit_code = EXIT_BAD_DATA


class ManifestError(DisentangleError):
    """A zoo manifest that cannot be read or has an invalid entry."""

    exit_code = EXIT_BAD_DATA


class WeightsError(DisentangleError):
    """A weight file that cannot be used: unreadable, not a zoo file, or a hash mismatch."""

    exit_code = EXIT_BAD_DATA


class HashMismatchError(WeightsError):
    """A file's sha256 is not the one its manifest records; it is never loaded."""


class ZooFileError(DisentangleError):
    """A pretrained file that is unavailable (offline, no source, every download failed) or corrupt."""

    exit_code = EXIT_BAD_DATA


class ZooOversizeDownloadError(ZooFileError, OversizeDownloadError):
    """A zoo download that announced or sent more bytes than the manifest's ``size``; it was stopped."""


# ---------------------------------------------------------------------- a failed run
class NonFiniteLossError(DisentangleError):
    """A loss became NaN or infinite; the last good checkpoint is kept."""

    exit_code = EXIT_RUN_FAILED


class GradientMismatchError(DisentangleError):
    """A parameter had a gradient on some ranks and none on others in the same step."""

    exit_code = EXIT_RUN_FAILED
