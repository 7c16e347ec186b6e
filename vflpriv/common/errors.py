"""User-facing errors: the CLI turns each into one ``error:`` line and exit code 2."""


class VflprivError(Exception):
    """Bad input a user can fix (unknown name, out-of-range value, missing file)."""

    #: The CLI's exit code for this error.
    exit_code = 2


class UnknownNameError(VflprivError, KeyError):
    """A name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class ConfigError(VflprivError, ValueError):
    """A configuration value out of range or inconsistent with another one."""


class DataError(VflprivError, OSError):
    """A dataset file is missing or does not have the expected layout."""


class IncompatibleError(VflprivError, ValueError):
    """A combination that makes no sense (e.g. a binary-only attack on a 10-class task)."""


class UnfitOptionsError(IncompatibleError):
    """An attack's options that its data leaves unread or cannot take (``own_problem``, ``victim_problem``): a sweep
    sets the cell aside; an audit or a multi-attack run on its one data set refuses them where the user gave them."""


class DivergedError(RuntimeError):
    """A model's outputs are not finite: the run is recorded as failed (not a user error, so a sweep goes on)
    instead of being scored as if NaN logits were guesses, which reads as chance, i.e. perfect protection."""


class ProtocolError(RuntimeError):
    """A method broke its declared protocol (a message it did not declare, or traffic that bypasses the
    channel): the run fails with the reason, and ``vflpriv audit --check-only`` refuses the method."""


class ChannelViolation(ProtocolError):
    """The method itself sent a message its protocol does not declare (``engine.channel``): the runner names the
    method in front of it; any other ProtocolError (an auditor's, an attack's reply) already names its author."""


class DamagedRecordError(VflprivError, ValueError):
    """A stored record no run writes (a hand edit), found where its per-target errors are parsed (a store read checks
    only what is cheap): one error line naming the run, which ``--overwrite`` recomputes."""


class RepeatedSeedError(VflprivError, ValueError):
    """A seed twice among the records of one leakage test (records the tables cannot tell apart): one error line
    naming them, instead of a test that counts one training twice."""


class ConformanceError(VflprivError):
    """A method that does not keep the engine's contract is refused before an audit (one error line)."""


class CacheError(RuntimeError):
    """A cached or stored state that does not check out; the caller discards it and recomputes."""


class Interrupted(VflprivError):
    """The user interrupted a sweep (Ctrl-C); finished runs are in the store."""

    exit_code = 130


def class_named(value: object, width: int = 60) -> str:
    """The name of ``value``'s class for an error, escaped and bounded (one line whatever a plugin named it), read
    without running its metaclass's code."""
    return type_named(type(value), width)


def exception_text(exc: BaseException, width: int = 300) -> str:
    """``str(exc)`` for an error, bounded: a plugin's exception's ``__str__`` is its code, which may fail ('?') or
    return a str subclass (copied, so its ``__format__`` never runs); one raising SystemExit ended the command at
    exit 0, silently (a KeyboardInterrupt still interrupts: a Ctrl-C cannot be told apart)."""
    try:
        return "".join((str(exc),))[:width]
    except (Exception, SystemExit):  # noqa: BLE001 - a plugin's own __str__
        return "?"


def type_named(cls: type, width: int = 60) -> str:
    """``cls.__name__`` for an error, escaped and bounded, read from ``type``'s own slot (a metaclass's
    ``__name__`` property never runs)."""
    return ascii(_slot(cls, "__name__"))[1:-1][:width]


def type_path(cls: type, width: int = 120) -> str:
    """``cls``'s ``module.qualname`` for an error, escaped and bounded, read as :func:`type_named` reads its name."""
    return ascii(f"{_slot(cls, '__module__')}.{_slot(cls, '__qualname__')}")[1:-1][:width]


def _slot(cls: type, attribute: str) -> str:
    """``type``'s own ``attribute`` of ``cls`` as an exact str ('?' where it has none, or a module that is no str):
    ``type()`` keeps a str subclass, whose ``__repr__`` or ``__format__`` would be the plugin's code."""
    try:
        return "".join((vars(type)[attribute].__get__(cls),))  # join copies a subclass's characters, calls nothing
    except (AttributeError, TypeError):
        return "?"
