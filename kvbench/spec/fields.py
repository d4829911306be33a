"""The one parser of ``key=value`` fields in option strings (pure).

Every option that takes ``key=value`` fields parses them here, whatever its separator: ``--deployment
gpus=8,drives=8,...`` and ``--fdp handles=4,ru=1GiB`` (``,``), a ``gen:`` trace's options, an admission spec
``tinylfu:width=0.5:sample=2`` (``:``), and the repeatable options whose every value is one pair (``--price dram=6
--price gpu=2.5``, ``--sweep nodes=4,8``, ``--field timestamp=ts``, ``--set turns_mean=10``). The rules are the
same everywhere:

- a value is split on the site's separator (a repeatable option gives one part per value); blank parts (a
  trailing comma) are skipped;
- a part is split at its first ``=``; the key and the value are stripped (``handles = 4 , ru = 1GiB`` reads as
  ``handles=4,ru=1GiB``);
- a key is spelled with ``-`` or ``_`` alike (``drive-capacity`` is ``drive_capacity``) and is returned in the
  site's own spelling of it;
- a part without ``=``, an unknown key (the message names it and the fix lists the known ones), a key given
  twice, an empty value and a missing required key are each a one-line error of the site's error type (a
  :class:`kvbench.errors.UsageError` or subclass: exit 2, no traceback), naming the option and the key.

The site keeps its own semantics: which keys, which are required, how a value is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kvbench.errors import UsageError


def norm_key(key: str) -> str:
    """A key's spelling for matching: stripped, ``-`` read as ``_``."""
    return str(key).strip().replace("-", "_")


def split_parts(value, sep: str = ",") -> list[str]:
    """The stripped, non-blank parts of ``value``: a string split on ``sep``, or a sequence (one part each)."""
    items = str(value).split(sep) if isinstance(value, str) else [str(x) for x in (value or ())]
    return [p.strip() for p in items if p.strip()]


def parse_fields(value, *, option: str, known: Iterable[str] | Callable[[str], str | None] | None = None,
                 known_text: str | None = None, required: Iterable[str] = (), sep: str = ",",
                 allow_empty: Iterable[str] | bool = (), noun: str = "field", fix: str | None = None,
                 error: type[UsageError] = UsageError) -> dict[str, str]:
    """``key=value`` parts of ``value`` -> {key: value} in the order given (keys in the site's spelling).

    ``option`` names the option in every message (``--fdp``). ``known``: the keys the site takes (a collection:
    matched with ``-``/``_`` alike, returned as spelled there), or a function from a normalised key to its
    canonical spelling or None (keys with a variable part, e.g. ``ssd.<class>``; ``known_text`` then says what is
    known), or None (any key, returned normalised); ``known_text=""`` leaves the list out of the fix (the site's
    ``fix`` says it). ``required``: keys that must be given. ``allow_empty``: keys
    (or True: all) whose value may be empty. ``fix``: the site's example, added to each message's fix. Errors are
    ``error`` (a UsageError subclass) with a one-line problem naming the option and the key.
    """
    if isinstance(known, Callable):
        lookup, listed = known, known_text
    elif known is not None:
        table = {norm_key(k): k for k in known}
        lookup, listed = table.get, ", ".join(table.values()) if known_text is None else known_text
    else:
        lookup, listed = norm_key, known_text
    empty_ok = allow_empty if isinstance(allow_empty, bool) else {norm_key(k) for k in allow_empty}

    def fail(problem: str, own_fix: str | None = None):
        raise error(problem, "; ".join(x for x in (own_fix, fix) if x) or None)

    out: dict[str, str] = {}
    for part in split_parts(value, sep):
        key, eq, val = part.partition("=")
        key, val = key.strip(), val.strip()
        if not eq or not key:
            fail(f"{option}: malformed {noun} {part!r} (not KEY=VALUE)", "write KEY=VALUE")
        canon = lookup(norm_key(key))
        if canon is None:
            fail(f"{option}: unknown {noun} {key!r}", f"known {noun}s: {listed}" if listed else None)
        if canon in out:
            fail(f"{option}: {noun} {canon!r} given twice", f"give each {noun} once")
        if not val and not (empty_ok is True or (empty_ok is not False and norm_key(canon) in empty_ok)):
            fail(f"{option}: {noun} {canon!r} has no value", f"write {canon}=VALUE")
        out[canon] = val
    missing = [k for k in required if k not in out]
    if missing:
        fail(f"{option}: missing {', '.join(missing)}", f"give {', '.join(k + '=...' for k in missing)}")
    return out
