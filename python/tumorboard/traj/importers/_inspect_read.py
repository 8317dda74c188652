"""inspect_ai importer: opening a log and streaming its samples, one at a time.

:func:`read_samples` gives a log's header and a generator of its samples as JSON objects, with
their attachments resolved, by either reader: the direct one (the zip members of a ``.eval``
log, stored, deflate or zstd, read one at a time; the ``samples`` array of a ``.json`` log read
with ``ijson``), or inspect_ai's own ``read_eval_log_samples``. A member that cannot be read
becomes a :class:`_BadSample`, so that it costs its sample only. The optional dependencies
(inspect-ai, zstandard, ijson) are imported here, when first needed.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._json import load_json
from ...errors import InvalidArgumentError, MissingDependencyError
from ._common import MalformedLog, NotOfFormat

READERS = ("auto", "direct", "inspect")

_ATTACHMENT = "attachment://"
_ZSTD = 93  # the zip compression method of Zstandard (APPNOTE.TXT 4.4.5)


_MODULES: dict[str, Any] = {}


def _need(module: str) -> Any:
    """Import ``module`` (an inspect_ai dependency) or raise MissingDependencyError."""
    import importlib

    if module in _MODULES:
        return _MODULES[module]
    try:
        _MODULES[module] = importlib.import_module(module)
        return _MODULES[module]
    except ImportError as exc:
        raise MissingDependencyError.for_extra(
            "tumorboard import inspect", package="inspect-ai", extra="inspect", cause=exc
        ) from None


# ----------------------------------------------------------------------------- direct reader


def _member_bytes(zf: zipfile.ZipFile, fh: Any, info: zipfile.ZipInfo) -> bytes:
    """Return the decompressed bytes of one zip member (stored, deflate or zstd)."""
    if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return zf.read(info)
    if info.compress_type != _ZSTD:
        raise MalformedLog(
            f"zip member {info.filename}: compression method {info.compress_type} (expected "
            "stored, deflate or zstd)"
        )
    # the raw member: local file header (APPNOTE.TXT 4.3.7), 30 bytes + name + extra field
    fh.seek(info.header_offset)
    head = fh.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise MalformedLog(f"zip member {info.filename}: bad local file header")
    skip = int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
    fh.seek(info.header_offset + 30 + skip)
    raw = fh.read(info.compress_size)
    dctx = _MODULES.get("_dctx")
    if dctx is None:
        dctx = _MODULES["_dctx"] = _need("zstandard").ZstdDecompressor()
    # inspect_ai writes members over 200 MiB as several zstd frames: read across them
    reader = dctx.stream_reader(io.BytesIO(raw), read_across_frames=True)
    out = reader.read()
    if zlib.crc32(out) != info.CRC:
        raise MalformedLog(f"zip member {info.filename}: CRC mismatch (corrupt log)")
    return out


def _split_member(name: str) -> tuple[str, int] | None:
    """Return (sample id, epoch) of a ``samples/<id>_epoch_<n>.json`` member name."""
    if not name.startswith("samples/") or not name.endswith(".json"):
        return None
    stem = name[len("samples/") : -len(".json")]
    sid, sep, epoch = stem.rpartition("_epoch_")
    if not sep or not epoch.isdigit():
        return None
    return sid, int(epoch)


def _direct_eval(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Return the header and a generator of the samples of a ``.eval`` log, read directly."""
    fh = open(path, "rb")  # noqa: SIM115 - closed by the generator
    try:
        zf = zipfile.ZipFile(fh)
        infos = {i.filename: i for i in zf.infolist()}
    except (zipfile.BadZipFile, OSError) as exc:
        fh.close()
        raise MalformedLog(f"not a zip archive ({exc})") from None
    head_name = "header.json" if "header.json" in infos else "_journal/start.json"
    if head_name not in infos:
        fh.close()
        raise MalformedLog("no header.json or _journal/start.json (not an inspect_ai log)")
    try:
        header = load_json(_member_bytes(zf, fh, infos[head_name]))
    except (InvalidArgumentError, MalformedLog, zipfile.BadZipFile, zlib.error) as exc:
        fh.close()
        raise MalformedLog(f"{head_name}: {exc}") from None
    if not isinstance(header, dict):
        fh.close()
        raise MalformedLog(f"{head_name}: not a JSON object (not an inspect_ai log)")
    members: dict[tuple[str, int], zipfile.ZipInfo] = {}
    for name, info in infos.items():
        key = _split_member(name)
        if key is not None:
            members[key] = info
    order = _sample_order(header, members)

    def samples() -> Iterator[dict[str, Any] | _BadSample]:
        try:
            for key in order:
                info = members[key]
                try:
                    yield load_json(_member_bytes(zf, fh, info))
                except (InvalidArgumentError, MalformedLog, zipfile.BadZipFile, zlib.error) as exc:
                    # one damaged member costs its sample, not the samples after it
                    reason = str(exc).removeprefix(f"zip member {info.filename}: ")
                    yield _BadSample(f"{key[0]}:{key[1]}", f"{info.filename}: {reason}")
        finally:
            fh.close()

    return header, samples()


@dataclass(frozen=True)
class _BadSample:
    """A sample the direct reader could not read: its ``<id>:<epoch>`` and the reason."""

    item_id: str
    reason: str


def _sample_order(header: Mapping[str, Any], members: Mapping[tuple[str, int], Any]) -> list:
    """Order (sample id, epoch) keys as inspect's reader does: dataset order, then epoch."""
    ids = ((header.get("eval") or {}).get("dataset") or {}).get("sample_ids") or []
    rank = {str(s): i for i, s in enumerate(ids)}
    return sorted(members, key=lambda k: (rank.get(k[0], len(rank)), k[0], k[1]))


def _direct_json(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Return the header and a generator of the samples of a ``.json`` log, read with ijson."""
    ijson = _need("ijson")
    header: dict[str, Any] = {}
    with open(path, "rb") as fh:
        try:
            builder = None
            key = None
            for prefix, event, value in ijson.parse(fh, use_float=True):
                if prefix == "" and event == "map_key":
                    if builder is not None:
                        header[key] = builder.value
                    builder = None
                    key = value
                    if key == "samples":
                        break
                    builder = ijson.ObjectBuilder()
                elif prefix == "" and event == "end_map":
                    if builder is not None:
                        header[key] = builder.value
                    break
                elif builder is not None:
                    builder.event(event, value)
                elif prefix == "" and event != "start_map":
                    raise NotOfFormat("not a JSON object (not an inspect_ai log)")
        except ijson.JSONError as exc:
            raise MalformedLog(f"not JSON ({exc})") from None
    if not isinstance(header.get("eval"), dict):
        raise NotOfFormat("no 'eval' object before 'samples' (not an inspect_ai log)")

    def samples() -> Iterator[dict[str, Any]]:
        with open(path, "rb") as fh:
            try:
                yield from ijson.items(fh, "samples.item", use_float=True)
            except ijson.JSONError as exc:
                raise MalformedLog(f"samples: not JSON ({exc})") from None

    return header, samples()


# ----------------------------------------------------------------------------- inspect reader


def _inspect_reader(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Return the header and samples as read by inspect_ai's own streaming reader."""
    log = _need("inspect_ai.log")
    try:
        head = log.read_eval_log(str(path), header_only=True)
    except Exception as exc:  # inspect raises pydantic, zip and JSON errors
        reason = f"{type(exc).__name__}: {exc}"
        raise MalformedLog(f"inspect_ai cannot read the log ({reason})") from None
    header = head.model_dump(mode="json", exclude={"samples", "reductions"})

    def samples() -> Iterator[dict[str, Any]]:
        try:
            for s in log.read_eval_log_samples(str(path), all_samples_required=False):
                yield s.model_dump(mode="json")
        except RuntimeError as exc:  # a log without sample ids
            raise MalformedLog(f"inspect_ai cannot read the samples ({exc})") from None

    return header, samples()


def read_samples(
    path: str | Path, *, reader: str = "auto"
) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Open an inspect_ai log: its header and a generator of its samples, one at a time.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.eval`` or ``.json`` log.
    reader : {"auto", "direct", "inspect"}, default "auto"
        "inspect": inspect_ai's ``read_eval_log_samples``; "direct" (and "auto"): the zip
        members or the JSON ``samples`` array read here (module docstring).

    Returns
    -------
    dict
        The log without its samples (``eval``, ``status``, ``results``, ...).
    iterator of dict
        The samples as JSON objects, with attachments resolved.

    Raises
    ------
    MalformedLog
        The file is not an inspect_ai log.
    InvalidArgumentError
        An unknown reader.
    MissingDependencyError
        inspect-ai (or its zstandard / ijson) is not installed.
    """
    if reader not in READERS:
        raise InvalidArgumentError(f"reader: expected one of {READERS}, got {reader!r}")
    path = Path(path)
    if reader == "inspect":
        header, it = _inspect_reader(path)
    elif path.suffix.lower() == ".eval":
        header, it = _direct_eval(path)
    else:
        header, it = _direct_json(path)
    return header, (_resolve(s) if isinstance(s, dict) else s for s in it)


#: Sample fields whose text inspect may move into ``attachments`` and that rows are made of
#: (the events are read only for ids, usage and times, which are never attachments).
_RESOLVED = ("input", "target", "messages", "output", "scores", "metadata", "error")


def _resolve(sample: dict[str, Any]) -> dict[str, Any]:
    """Replace ``attachment://<hash>`` strings of the fields rows are made of by their text."""
    att = sample.pop("attachments", None) or {}
    if not att:
        return sample

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            if v.startswith(_ATTACHMENT):
                return att.get(v[len(_ATTACHMENT) :], v)
            return v
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    for key in _RESOLVED:
        if key in sample:
            sample[key] = walk(sample[key])
    return sample
