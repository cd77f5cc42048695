"""One small registry type for every pluggable kind (backbones, objectives, datasets, metrics)."""
from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from ..errors import UnknownNameError

T = TypeVar("T")


def did_you_mean(name: str, choices: list[str] | tuple[str, ...]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else ""


class Registry(Generic[T]):
    """A name -> builder mapping for one kind of pluggable component.

    >>> BACKBONES = Registry("backbone")
    >>> @BACKBONES.register("tiny")
    ... def tiny(latent_dim: int = 2): ...
    >>> BACKBONES.names()
    ('tiny',)

    ``build(name, **cfg)`` calls the registered builder with ``cfg``; an unknown name raises
    :class:`UnknownNameError` with the valid names and a did-you-mean suggestion.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., T]] = {}

    def register(self, name: str, obj: Callable[..., T] | None = None, *, overwrite: bool = False):
        """Register ``obj`` under ``name``; usable as ``@REG.register("name")`` or directly."""

        def add(target: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries and not overwrite and self._entries[name] is not target:
                raise ValueError(
                    f"A {self.kind} named '{name}' is already registered "
                    f"({self._entries[name]!r}); pass overwrite=True to replace it."
                )
            self._entries[name] = target
            try:
                target.registry_name = name  # type: ignore[attr-defined]
            except (AttributeError, TypeError):
                pass
            return target

        return add(obj) if obj is not None else add

    def get(self, name: str) -> Callable[..., T]:
        """The builder registered as ``name``."""
        if name not in self._entries:
            valid = ", ".join(sorted(self._entries)) or "(none registered)"
            raise UnknownNameError(
                f"Unknown {self.kind} '{name}'.{did_you_mean(name, self.names())} "
                f"Valid {self.kind} names: {valid}. A {self.kind} of your own is registered by importing its "
                f"module first: --import MODULE_OR_FILE.py on a command line, imports: in a sweep file."
            )
        return self._entries[name]

    def build(self, name: str, **cfg: Any) -> T:
        """Call the builder registered as ``name`` with keyword arguments ``cfg``."""
        return self.get(name)(**cfg)

    def parameters(self, name: str) -> dict[str, inspect.Parameter]:
        """The keyword parameters the builder of ``name`` accepts (used to validate configs)."""
        target = self.get(name)
        sig = inspect.signature(target.__init__ if inspect.isclass(target) else target)
        return {
            p.name: p
            for p in sig.parameters.values()
            if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={list(self.names())})"
