"""NVMe SMART / health and OCP C0h counters through nvme-cli's JSON, read before and after a run.

What it gives: host bytes the drive received (SMART "data units written", 1000 x 512-byte units, NVMe base
spec, Get Log Page 02h), NAND bytes it programmed (OCP Datacenter NVMe SSD spec, log C0h "Physical Media Units
Written", in bytes, 128-bit), wear ("percent used") and media errors. Device WAF = delta NAND / delta host.

Parsed formats (``tests/fixtures/smart``):
- ``nvme smart-log DEV -o json`` (nvme-cli 1.x and 2.x: ``data_units_written``, ``percent_used``,
  ``media_errors``, ...; 128-bit values appear as numbers, floats or numeric strings depending on version);
- ``smartctl -j -a DEV`` (``nvme_smart_health_information_log`` with ``percentage_used``);
- ``nvme ocp smart-add-log DEV -o json`` (``"Physical media units written": {"hi", "lo"}`` in log page
  version <= 3 output, ``physical_media_units_written`` in the newer output);
- ``nvme fdp stats DEV --endgrp-id=N -o json`` (NVMe FDP Statistics log, 22h, endurance-group scoped: ``hbmw``
  host bytes with metadata written, ``mbmw`` media bytes with metadata written, ``mbe`` media bytes erased,
  128-bit, printed as decimal strings by nvme-cli's ``json_nvme_fdp_stats`` in nvme-print-json.c). Device WAF
  from FDP = delta mbmw / delta hbmw. A drive without FDP answers the command with an error: its ``fdp`` is
  None and the delta says so, never a made-up figure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from kvbench.errors import DependencyError, SpecError

DATA_UNIT_BYTES = 512_000   # NVMe: data units are thousands of 512-byte units


def _num(value, *, what: str) -> int:
    """A counter from nvme-cli JSON: int, float, numeric string (maybe with commas) or {"hi", "lo"}."""
    if isinstance(value, bool) or value is None:
        raise SpecError(f"SMART field {what!r} is {value!r}", "give nvme-cli JSON output")
    if isinstance(value, dict):
        if "hi" in value and "lo" in value:
            return (_num(value["hi"], what=what + ".hi") << 64) | _num(value["lo"], what=what + ".lo")
        raise SpecError(f"SMART field {what!r} is an object without hi/lo", "give nvme-cli JSON output")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(round(value))
    s = str(value).strip().replace(",", "")
    if s.lower().startswith("0x"):
        return int(s, 16)
    m = re.match(r"^([0-9]+)(\.[0-9]*)?", s)
    if not m:
        raise SpecError(f"SMART field {what!r} is not a number: {value!r}", "give nvme-cli JSON output")
    return int(m.group(1))


def _get(d: dict, *names):
    for n in names:
        if n in d:
            return d[n]
    return None


@dataclass(frozen=True)
class SmartLog:
    """The NVMe SMART / health log fields kvbench uses."""

    data_units_written: int
    data_units_read: int
    percent_used: int
    media_errors: int
    host_write_commands: int | None = None
    available_spare: int | None = None
    critical_warning: int | None = None
    power_on_hours: int | None = None

    @property
    def host_bytes_written(self) -> int:
        return self.data_units_written * DATA_UNIT_BYTES

    @property
    def host_bytes_read(self) -> int:
        return self.data_units_read * DATA_UNIT_BYTES


@dataclass(frozen=True)
class OcpLog:
    """OCP C0h (SMART / health extended) fields kvbench uses: bytes the media saw."""

    physical_media_bytes_written: int
    physical_media_bytes_read: int | None = None
    percent_free_blocks: int | None = None


@dataclass(frozen=True)
class FdpStats:
    """NVMe FDP Statistics log (22h) of one endurance group: bytes with metadata, as the drive counts them."""

    host_bytes_written: int        # HBMW
    media_bytes_written: int       # MBMW: host and GC writes to the media
    media_bytes_erased: int        # MBE


_FDP_KEYS = {"host_bytes_written": ("hbmw", "Host Bytes with Metadata Written", "host_bytes_with_metadata_written"),
             "media_bytes_written": ("mbmw", "Media Bytes with Metadata Written",
                                     "media_bytes_with_metadata_written"),
             "media_bytes_erased": ("mbe", "Media Bytes Erased", "media_bytes_erased")}


def parse_fdp_stats(doc) -> FdpStats:
    """Parse ``nvme fdp stats DEV --endgrp-id=N -o json`` output."""
    d = _as_dict(doc, "fdp stats")
    vals = {}
    for field_name, names in _FDP_KEYS.items():
        v = _get(d, *names)
        if v is None:
            raise SpecError(f"FDP statistics log has no {names[0]!r} ({names[1]})",
                            "give the output of 'nvme fdp stats DEV --endgrp-id=N -o json' (drive must support FDP)")
        vals[field_name] = _num(v, what=names[0])
    return FdpStats(**vals)


def parse_smart_log(doc) -> SmartLog:
    """Parse ``nvme smart-log -o json`` (or ``smartctl -j``) output: a JSON string, bytes or dict."""
    d = _as_dict(doc, "smart-log")
    if "nvme_smart_health_information_log" in d:      # smartctl -j
        d = d["nvme_smart_health_information_log"]
    dw = _get(d, "data_units_written", "Data Units Written")
    if dw is None:
        raise SpecError("SMART log has no 'data_units_written'",
                        "give the output of 'nvme smart-log DEV -o json' or 'smartctl -j -a DEV'")
    opt = {}
    for field_name, names in (("host_write_commands", ("host_write_commands", "host_writes")),
                              ("available_spare", ("avail_spare", "available_spare")),
                              ("critical_warning", ("critical_warning",)),
                              ("power_on_hours", ("power_on_hours",))):
        v = _get(d, *names)
        if isinstance(v, dict) and "value" in v:     # nvme-cli verbose critical_warning object
            v = v["value"]
        opt[field_name] = _num(v, what=field_name) if v is not None else None
    return SmartLog(
        data_units_written=_num(dw, what="data_units_written"),
        data_units_read=_num(_get(d, "data_units_read") or 0, what="data_units_read"),
        percent_used=_num(_get(d, "percent_used", "percentage_used") or 0, what="percent_used"),
        media_errors=_num(_get(d, "media_errors") or 0, what="media_errors"),
        **opt)


def parse_ocp_log(doc) -> OcpLog:
    """Parse ``nvme ocp smart-add-log -o json`` output (both key spellings nvme-cli has used)."""
    d = _as_dict(doc, "ocp smart-add-log")
    w = _get(d, "Physical media units written", "physical_media_units_written")
    if w is None:
        raise SpecError("OCP C0h log has no 'Physical media units written'",
                        "give the output of 'nvme ocp smart-add-log DEV -o json' (drive must support OCP)")
    r = _get(d, "Physical media units read", "physical_media_units_read")
    free = _get(d, "Percent free blocks", "percent_free_blocks")
    return OcpLog(physical_media_bytes_written=_num(w, what="physical_media_units_written"),
                  physical_media_bytes_read=_num(r, what="physical_media_units_read") if r is not None else None,
                  percent_free_blocks=_num(free, what="percent_free_blocks") if free is not None else None)


def _as_dict(doc, what: str) -> dict:
    if isinstance(doc, dict):
        return doc
    if isinstance(doc, (bytes, bytearray)):
        doc = doc.decode("utf-8", "replace")
    try:
        d = json.loads(doc)
    except (TypeError, json.JSONDecodeError) as e:
        raise SpecError(f"{what}: not JSON ({e})", "run nvme-cli with -o json") from None
    if not isinstance(d, dict):
        raise SpecError(f"{what}: expected a JSON object", "run nvme-cli with -o json")
    return d


@dataclass(frozen=True)
class DeviceCounters:
    """One reading of a drive's counters (either log may be missing)."""

    device: str
    smart: SmartLog | None
    ocp: OcpLog | None
    fdp: FdpStats | None = None      # None: the drive (or this nvme-cli) reports no FDP statistics

    def to_dict(self) -> dict:
        return {"device": self.device, "smart": asdict(self.smart) if self.smart else None,
                "ocp": asdict(self.ocp) if self.ocp else None, "fdp": asdict(self.fdp) if self.fdp else None}

    @classmethod
    def from_dict(cls, d: dict) -> "DeviceCounters":
        return cls(d["device"], SmartLog(**d["smart"]) if d.get("smart") else None,
                   OcpLog(**d["ocp"]) if d.get("ocp") else None, FdpStats(**d["fdp"]) if d.get("fdp") else None)


@dataclass(frozen=True)
class CounterDelta:
    """What the drive did between two readings."""

    device: str
    host_bytes_written: int | None
    nand_bytes_written: int | None
    percent_used_delta: int | None
    media_errors_delta: int | None
    fdp_host_bytes_written: int | None = None
    fdp_media_bytes_written: int | None = None
    fdp_media_bytes_erased: int | None = None

    @property
    def device_waf(self) -> float | None:
        """NAND bytes / host bytes (None without the OCP counter or when nothing was written).

        SMART data units round up to 512,000 bytes: keep runs well above that for a meaningful ratio."""
        if self.nand_bytes_written is None or not self.host_bytes_written:
            return None
        return self.nand_bytes_written / self.host_bytes_written

    @property
    def fdp_waf(self) -> float | None:
        """Media bytes / host bytes from the FDP statistics log (None when the drive reports none, or nothing was
        written)."""
        if self.fdp_media_bytes_written is None or not self.fdp_host_bytes_written:
            return None
        return self.fdp_media_bytes_written / self.fdp_host_bytes_written

    @property
    def fdp_note(self) -> str:
        if self.fdp_media_bytes_written is None:
            return "the drive reports no FDP statistics (no FDP support, FDP disabled, or nvme-cli without fdp)"
        return "measured: FDP statistics log, media / host bytes with metadata written"

    def to_dict(self) -> dict:
        return {**asdict(self), "device_waf": self.device_waf, "fdp_waf": self.fdp_waf, "fdp_note": self.fdp_note}


def delta(before: DeviceCounters, after: DeviceCounters) -> CounterDelta:
    """Counters after - before (fields one reading lacks are None)."""
    if before.device != after.device:
        raise SpecError(f"counter readings of different devices ({before.device}, {after.device})",
                        "compare readings of one device")
    sb, sa, ob, oa = before.smart, after.smart, before.ocp, after.ocp
    fb, fa = before.fdp, after.fdp
    fdp = {f"fdp_{k}": (getattr(fa, k) - getattr(fb, k) if fa and fb else None) for k in _FDP_KEYS}
    return CounterDelta(**fdp,
        device=after.device,
        host_bytes_written=sa.host_bytes_written - sb.host_bytes_written if sa and sb else None,
        nand_bytes_written=oa.physical_media_bytes_written - ob.physical_media_bytes_written if oa and ob else None,
        percent_used_delta=sa.percent_used - sb.percent_used if sa and sb else None,
        media_errors_delta=sa.media_errors - sb.media_errors if sa and sb else None)


# --- reading a live drive -------------------------------------------------------------------------------
def nvme_device_for(path: str | os.PathLike) -> str | None:
    """The NVMe namespace device (``/dev/nvme0n1``) holding a file or block device, or None when not NVMe."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError:
        return None
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    sys_dev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    try:
        real = sys_dev.resolve(strict=True)
    except OSError:
        return None
    name = real.name
    if (real / "partition").exists():
        name = real.parent.name
    return f"/dev/{name}" if re.match(r"^nvme\d+n\d+$", name) else None


def _run_json(args: list[str], timeout: float = 20.0) -> dict | None:
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0 or not p.stdout.strip():
        return None
    try:
        d = json.loads(p.stdout)
    except json.JSONDecodeError:
        return None
    return d if isinstance(d, dict) else None


def read_counters(device: str, *, nvme: str | None = None, endurance_group: int = 1) -> DeviceCounters:
    """Read SMART (and OCP C0h and FDP statistics when the drive has them) from an NVMe device with nvme-cli.

    Raises DependencyError when nvme-cli is missing; a log the drive does not return is None."""
    exe = nvme or shutil.which("nvme")
    if not exe:
        raise DependencyError("nvme-cli is not installed: no SMART/OCP counters",
                              "apt-get install nvme-cli (or .ci/install), or rely on the FTL model")
    smart_doc = _run_json([exe, "smart-log", device, "-o", "json"])
    ocp_doc = _run_json([exe, "ocp", "smart-add-log", device, "-o", "json"])
    fdp_doc = _run_json([exe, "fdp", "stats", device, f"--endgrp-id={endurance_group}", "-o", "json"])
    smart = ocp = fdp = None
    try:
        smart = parse_smart_log(smart_doc) if smart_doc else None
    except SpecError:
        smart = None
    try:
        ocp = parse_ocp_log(ocp_doc) if ocp_doc else None
    except SpecError:
        ocp = None
    try:
        fdp = parse_fdp_stats(fdp_doc) if fdp_doc else None
    except SpecError:
        fdp = None
    return DeviceCounters(device=device, smart=smart, ocp=ocp, fdp=fdp)


def try_read_counters(path: str | os.PathLike) -> DeviceCounters | None:
    """Counters of the NVMe drive behind ``path`` when nvme-cli and an NVMe device exist; otherwise None
    (never raises: a run on a loop device or tmpfs simply has no device counters)."""
    dev = nvme_device_for(path)
    if dev is None or not shutil.which("nvme"):
        return None
    try:
        c = read_counters(dev)
    except DependencyError:
        return None
    return c if (c.smart or c.ocp) else None


class DeviceWatch:
    """Read the counters of the NVMe drives behind some paths before a run and again after it.

    ``watch = DeviceWatch({"l3": "/mnt/nvme/store"}); ...run...; summary["device_counters"] = watch.stop()``
    gives, per name, the delta (host bytes, NAND bytes, device WAF, wear, media errors) or None where the path
    is not on an NVMe drive or nvme-cli is missing. Never raises: counters are a bonus, not a precondition."""

    def __init__(self, paths: dict[str, str | os.PathLike]):
        self.paths = dict(paths)
        self.before = {name: try_read_counters(p) for name, p in self.paths.items()}

    def stop(self) -> dict[str, dict | None]:
        out = {}
        for name, p in self.paths.items():
            b = self.before.get(name)
            a = try_read_counters(p) if b is not None else None
            out[name] = delta(b, a).to_dict() if (a is not None and b is not None) else None
        return out
