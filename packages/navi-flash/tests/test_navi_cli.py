"""End-to-end CLI runs of every command on a simulated card directory and through the simulated USB bridge."""

import hashlib
import io
import json

import pytest
from navi_flash.devices import DeviceContext
from navi_flash.progress import RichProgress
from navi_flash.sim import Faults, SimCard, SimTransport, SimUsbBackend
from navi_flash.sim.card import DEFAULT_REGISTERS
from rich.console import Console


def set_faults(directory, **faults):
    card = SimCard.load(directory)
    card.faults = Faults(**faults)
    card.save()


def assert_registers_restored(directory):
    assert SimCard.load(directory).registers == DEFAULT_REGISTERS


def test_sim_create_options(run_cli, tmp_path, ifwi):
    (tmp_path / "img.bin").write_bytes(ifwi)
    (tmp_path / "psp.json").write_text(json.dumps({"transfer_types": [0x104], "errors": {"0x9": [1, 12]}}))
    result = run_cli("sim", "create", str(tmp_path / "c"), "--image", str(tmp_path / "img.bin"), "--cmp", "--gated", "--no-rx-lag",
                     "--psp-script", str(tmp_path / "psp.json"))
    assert result.code == 0, result.err
    card = SimCard.load(tmp_path / "c")
    assert card.flash == bytearray(ifwi) and card.chip.sr2 == 0x40 and card.rom_sw.gated and not card.rom_sw.rx_lag
    assert card.psp.script.transfer_types == [0x104] and card.psp.script.errors == {9: (1, 12)}
    again = run_cli("sim", "create", str(tmp_path / "c"))
    assert again.code == 1 and again.err.startswith("error: ") and "already holds" in again.err


def test_info_text_and_json(run_cli, card_dir):
    text = run_cli("--transport", "sim", "--sim", str(card_dir), "romless", "info")
    assert text.code == 0 and "C8 60 15 detected" in text.out and "signature_offset=1" in text.out
    data = json.loads(run_cli("--sim", str(card_dir), "romless", "info", "--json").out)
    assert data["jedec"] == "c86015c8" and data["cmp"] is False and data["sfdp"].startswith("ff53464450")
    assert_registers_restored(card_dir)


def test_read_hex_and_file(run_cli, card_dir, ifwi, tmp_path):
    result = run_cli("--sim", str(card_dir), "romless", "read", "0x1ff0", "0x20")
    assert result.out.strip() == ifwi[0x1FF0:0x2010].hex()
    run_cli("--sim", str(card_dir), "romless", "read", "4096", "0x100", "-o", str(tmp_path / "r.bin"))
    assert (tmp_path / "r.bin").read_bytes() == ifwi[0x1000:0x1100]


def test_dump_and_verify_the_whole_chip(run_cli, card_dir, ifwi, tmp_path):
    result = run_cli("--sim", str(card_dir), "romless", "dump", str(tmp_path / "d.bin"))
    assert result.code == 0 and (tmp_path / "d.bin").read_bytes() == ifwi
    assert hashlib.sha256(ifwi).hexdigest() in result.out and "dump: 0x200000/0x200000 bytes, 512/512 sectors" in result.out
    (tmp_path / "img.bin").write_bytes(ifwi)
    verified = json.loads(run_cli("--sim", str(card_dir), "romless", "verify", str(tmp_path / "img.bin"), "--json").out)
    assert verified["ok"] and verified["sha256"] == hashlib.sha256(ifwi).hexdigest()


def test_verify_mismatch_is_an_error(run_cli, card_dir, ifwi, tmp_path):
    image = bytearray(ifwi)
    image[0x12345] ^= 0xFF
    (tmp_path / "img.bin").write_bytes(image)
    result = run_cli("--sim", str(card_dir), "romless", "verify", str(tmp_path / "img.bin"), "--json")
    assert result.code == 1 and json.loads(result.out)["mismatch"] == 0x12345
    assert result.err == f"error: verify mismatch at 0x12345: flash={ifwi[0x12345]:02x} image={image[0x12345]:02x}\n"


def test_flash_cycle_backup_resume_dry_run_json(run_cli, card_dir, ifwi, tmp_path):
    image = bytearray(ifwi)
    image[0x3000:0x5000] = bytes(0x2000)
    (tmp_path / "img.bin").write_bytes(image)
    sim = ("--sim", str(card_dir), "romless", "flash", str(tmp_path / "img.bin"))
    refused = run_cli(*sim, "--sector-count", "8")
    assert refused.code == 1 and "--yes" in refused.err
    plan = run_cli(*sim, "--sector-count", "8", "--dry-run")
    assert plan.code == 0 and "program 2, skip 6; nothing written" in plan.out
    assert SimCard.load(card_dir).flash == bytearray(ifwi)
    done = run_cli(*sim, "--sector-count", "8", "--backup", str(tmp_path / "b.bin"), "--yes")
    assert done.code == 0 and "written 2, skipped 6 identical" in done.out and (tmp_path / "b.bin").read_bytes() == ifwi
    again = json.loads(run_cli(*sim, "--sector-count", "0x8", "--no-backup", "--json", "--yes").out)
    assert again["skipped"] == 8 and again["verified"] and again["written_sectors"] == 0
    assert SimCard.load(card_dir).flash == image
    assert_registers_restored(card_dir)


def test_flash_argument_errors(run_cli, card_dir, tmp_path):
    (tmp_path / "short.bin").write_bytes(bytes(100))
    sim = ("--sim", str(card_dir), "romless", "flash")
    for argv, message in (((str(tmp_path / "short.bin"), "--yes"), "exactly 0x200000 bytes"),
                          ((str(tmp_path / "missing.bin"), "--yes"), "cannot read"),
                          ((str(tmp_path / "short.bin"), "--backup", "x", "--no-backup", "--yes"), "not allowed with"),
                          ((str(tmp_path / "short.bin"), "--start-sector", "zz"), "not a number")):
        result = run_cli(*sim, *argv)
        assert result.code == 1 and result.err.startswith("error: ") and message in result.err and result.err.count("\n") == 1


def test_cmp_card_needs_clear_cmp(run_cli, tmp_path, ifwi):
    directory = tmp_path / "c"
    SimCard.create(directory, bytes(0x200000), cmp=True)
    (tmp_path / "img.bin").write_bytes(ifwi)
    sim = ("--sim", str(directory), "romless", "flash", str(tmp_path / "img.bin"), "--sector-count", "2", "--no-backup", "--yes")
    assert "rerun with --clear-cmp" in run_cli(*sim).err
    result = run_cli(*sim, "--clear-cmp")
    assert result.code == 0 and "cleared SR2.CMP" in result.out
    assert SimCard.load(directory).chip.sr2 == 0


@pytest.mark.parametrize(("faults", "message"), [
    ({"busy_forever": True}, "flash stayed busy"),
    ({"wrong_jedec": True}, "unexpected JEDEC capture ef4015"),
    ({"stuck_bits": {0x1000: 0x80}}, "sector 1 did not verify at 0x1000"),
    ({"interrupt_after_transactions": 300}, "interrupted"),
    ({"disconnect_after_mmio": 20000}, "stopped answering"),
])
def test_faults_end_in_one_error_line_with_registers_restored(run_cli, tmp_path, ifwi, faults, message):
    directory = tmp_path / "c"
    SimCard.create(directory, bytes(0x200000))
    set_faults(directory, **faults)
    (tmp_path / "img.bin").write_bytes(ifwi)
    result = run_cli("--sim", str(directory), "romless", "flash", str(tmp_path / "img.bin"), "--sector-count", "4", "--no-backup", "--yes")
    assert result.code == 1 and result.err.startswith("error: ") and message in result.err and result.err.count("\n") == 1
    if "disconnect_after_mmio" not in faults:
        assert_registers_restored(directory)
    if "stuck_bits" in faults:
        assert "OK sector 000" in result.out and "OK sector 001" not in result.out


def test_gated_card(run_cli, tmp_path):
    SimCard.create(tmp_path / "c", gated=True)
    result = run_cli("--sim", str(tmp_path / "c"), "romless", "info")
    assert result.code == 1 and "0x04000800" in result.err and "gated" in result.err
    assert_registers_restored(tmp_path / "c")


def test_fw_probe_dump_and_ifwi_all(run_cli, card_dir, ifwi, tmp_path):
    probe = run_cli("--sim", str(card_dir), "fw", "probe")
    assert probe.code == 0 and "transfer_type: error=0x0 response=0x1" in probe.out
    dump = run_cli("--sim", str(card_dir), "fw", "dump", str(tmp_path / "fw.bin"))
    assert dump.code == 0 and (tmp_path / "fw.bin").read_bytes() == ifwi
    (tmp_path / "img.bin").write_bytes(ifwi)
    assert "--yes" in run_cli("--sim", str(card_dir), "fw", "ifwi-all", str(tmp_path / "img.bin")).err
    streamed = run_cli("--sim", str(card_dir), "fw", "ifwi-all", str(tmp_path / "img.bin"), "--yes")
    assert streamed.code == 0 and "hard power cycle required" in streamed.out
    received = SimCard.load(card_dir).psp.received
    assert [entry["item"] for entry in received] == [0x01, 0x80, 0x81, 0x04, 0x05, 0x08] and all(entry["complete"] for entry in received)


def test_fw_probe_gated_hint(run_cli, tmp_path):
    (tmp_path / "psp.json").write_text(json.dumps({"gated": True}))
    run_cli("sim", "create", str(tmp_path / "c"), "--psp-script", str(tmp_path / "psp.json"))
    result = run_cli("--sim", str(tmp_path / "c"), "fw", "probe")
    assert result.code == 0 and "error=0xa" in result.out and "update commands gated" in result.err


def test_fw_dump_refuses_mirrored_aperture(run_cli, tmp_path, ifwi):
    SimCard.create(tmp_path / "c", ifwi, aperture="mirrored")
    result = run_cli("--sim", str(tmp_path / "c"), "fw", "dump", str(tmp_path / "out.bin"))
    assert result.code == 1 and "mirrored" in result.err and not (tmp_path / "out.bin").exists()


@pytest.mark.parametrize("argv", [("stream", "0x4", "img.bin", "--yes"), ("ifwi-step", "img.bin", "--yes"), ("live-flash", "img.bin", "--yes")])
def test_disabled_firmware_writes(run_cli, card_dir, argv):
    result = run_cli("--sim", str(card_dir), "fw", *argv)
    assert result.code == 1 and "firmware writes are disabled" in result.err and "romless flash" in result.err


def test_list_and_usage_errors(run_cli, card_dir):
    listed = run_cli("--sim", str(card_dir), "list")
    assert listed.code == 0 and f"sim:{card_dir}" in listed.out
    for argv, message in ((("--transport", "sim", "romless", "info"), "needs --sim"), (("frobnicate",), "invalid choice"),
                          (("--sim", str(card_dir / "nope"), "romless", "info"), "no simulated card")):
        result = run_cli(*argv)
        assert result.code == 1 and result.err.startswith("error: ") and message in result.err


def test_commands_through_the_simulated_usb_bridge(run_cli, tmp_path, ifwi):
    card = SimCard(bytes(0x200000))
    context = DeviceContext(usb_backend=SimUsbBackend(card), lock_dir=tmp_path, sysfs_root=tmp_path / "none")
    assert "usb   0  auto 0   usb:1-7  add1:0001" in run_cli("list", context=context).out
    assert "C8 60 15 detected" in run_cli("--transport", "usb", "romless", "info", context=context).out
    (tmp_path / "img.bin").write_bytes(ifwi)
    result = run_cli("--transport", "usb", "romless", "flash", str(tmp_path / "img.bin"), "--start-sector", "0x10", "--sector-count", "2",
                     "--no-backup", "--yes", context=context)
    assert result.code == 0 and card.flash[0x10000:0x12000] == ifwi[0x10000:0x12000]
    card.faults.f0_transient = 2
    assert run_cli("--transport", "usb", "romless", "read", "0x10000", "16", context=context).out.strip() == ifwi[0x10000:0x10010].hex()
    card.faults.f0_transient, card.faults.f0_persistent = 0, True
    persistent = run_cli("--transport", "usb", "romless", "info", context=context)
    assert persistent.code == 1 and persistent.err.startswith("error: TLP") and "after 10 retries" in persistent.err
    card.faults.f0_persistent = False
    card.faults.usb_disconnect_after = context.usb_backend.transfers + 150  # unplugged in the middle of the command
    failed = run_cli("--transport", "usb", "romless", "info", context=context)
    assert failed.code == 1 and failed.err.startswith("error: ") and "No such device" in failed.err


def test_rich_progress_on_a_terminal():
    stream = io.StringIO()
    progress = RichProgress(Console(file=stream, force_terminal=True, width=120))
    progress.start("dump", 0x4000)
    progress.advance(0x2000)
    progress.finish()
    assert "dump" in stream.getvalue() and "2/4 sectors" in stream.getvalue()


def test_fw_dump_works_while_rom_sw_is_gated(run_cli, tmp_path, ifwi):
    SimCard.create(tmp_path / "c", ifwi, gated=True)
    result = run_cli("--sim", str(tmp_path / "c"), "fw", "dump", str(tmp_path / "out.bin"))
    assert result.code == 0 and (tmp_path / "out.bin").read_bytes() == ifwi


def test_bad_prescale_and_device_index(run_cli, card_dir):
    result = run_cli("--sim", str(card_dir), "--prescale", "0x10", "romless", "info")
    assert result.code == 1 and "prescale must be 0..15" in result.err
    missing = run_cli("--transport", "usb", "--device", "3", "romless", "info",
                      context=DeviceContext(usb_backend=SimUsbBackend(SimCard()), lock_dir=card_dir))
    assert missing.code == 1 and "device index 3 out of range (found 1)" in missing.err


def test_a_card_directory_is_locked_while_in_use(run_cli, card_dir):
    holder = SimTransport(SimCard.load(card_dir))
    try:
        result = run_cli("--sim", str(card_dir), "romless", "info")
        assert result.code == 1 and "in use by another process" in result.err
    finally:
        holder.close()
    assert run_cli("--sim", str(card_dir), "romless", "info").code == 0


@pytest.fixture
def usb_card(tmp_path, ifwi):
    card = SimCard(ifwi)
    return card, DeviceContext(usb_backend=SimUsbBackend(card), lock_dir=tmp_path, sysfs_root=tmp_path / "none")


def test_dumps_through_the_simulated_usb_bridge(run_cli, usb_card, ifwi, tmp_path):
    card, context = usb_card
    romless_dump = run_cli("--transport", "usb", "romless", "dump", str(tmp_path / "a.bin"), context=context)
    assert romless_dump.code == 0 and (tmp_path / "a.bin").read_bytes() == ifwi
    fw_dump = run_cli("--transport", "usb", "fw", "dump", str(tmp_path / "b.bin"), context=context)
    assert fw_dump.code == 0 and (tmp_path / "b.bin").read_bytes() == ifwi


def test_verify_and_firmware_commands_through_the_simulated_usb_bridge(run_cli, usb_card, ifwi, tmp_path):
    card, context = usb_card
    image = bytearray(ifwi)
    image[0x80] ^= 1
    (tmp_path / "img.bin").write_bytes(image)
    verify = run_cli("--transport", "usb", "romless", "verify", str(tmp_path / "img.bin"), "--json", context=context)
    assert verify.code == 1 and json.loads(verify.out)["mismatch"] == 0x80
    probe = run_cli("--transport", "usb", "fw", "probe", context=context)
    assert probe.code == 0 and "model_id: error=0x0 response=0xc86015" in probe.out
    (tmp_path / "ifwi.bin").write_bytes(ifwi)
    streamed = run_cli("--transport", "usb", "fw", "ifwi-all", str(tmp_path / "ifwi.bin"), "--yes", context=context)
    assert streamed.code == 0 and len(card.psp.received) == 6 and all(entry["complete"] for entry in card.psp.received)
    disabled = run_cli("--transport", "usb", "fw", "live-flash", str(tmp_path / "ifwi.bin"), "--yes", context=context)
    assert disabled.code == 1 and "disabled" in disabled.err


def test_sim_create_and_read_reject_bad_sizes(run_cli, tmp_path, card_dir):
    (tmp_path / "small.bin").write_bytes(bytes(10))
    created = run_cli("sim", "create", str(tmp_path / "c"), "--image", str(tmp_path / "small.bin"))
    assert created.code == 1 and "exactly 0x200000 bytes" in created.err
    read = run_cli("--sim", str(card_dir), "romless", "read", "0x1ffff0", "0x20")
    assert read.code == 1 and "outside the 0x200000-byte flash" in read.err


def test_no_device_found(run_cli, tmp_path):
    context = DeviceContext(usb_backend=SimUsbBackend(SimCard(), vendor=0x1234), lock_dir=tmp_path, sysfs_root=tmp_path / "none")
    result = run_cli("romless", "info", context=context)
    assert result.code == 1 and "no supported auto Navi31 device found" in result.err
    assert "no devices found" in run_cli("list", context=context).out


def test_an_unexpected_exception_is_an_internal_error_line(run_cli, monkeypatch):
    """(#24 item 4) a bug is `internal error: ...` on one line and exit 1; the traceback only with DEBUG=1."""
    from navi_flash import cli

    def broken(self):
        raise IndexError("surprise")

    monkeypatch.setattr(cli.Cli, "run", broken)
    monkeypatch.delenv("DEBUG", raising=False)
    result = run_cli("list")
    assert result.code == 1 and result.err.startswith("internal error: IndexError: surprise") and result.err.count("\n") == 1
    monkeypatch.setenv("DEBUG", "1")
    assert "Traceback" in run_cli("list").err


def test_python_m_navi_flash_and_a_closed_pipe(tmp_path):
    """(#25 item 5) `python -m navi_flash` runs the command; a reader that goes away ends it quietly."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "navi_flash", "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    _, err = proc.communicate()
    assert proc.returncode == 0 and err == b""
    done = subprocess.run([sys.executable, "-m", "navi_flash", "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("navi-flash ")


def test_a_backup_is_never_overwritten_and_outputs_are_checked_before_reading(run_cli, card_dir, ifwi, tmp_path, monkeypatch):
    """(#25 item 3) `--backup FILE` replaced an existing backup (a rerun after an interrupted flash put the half-written
    state over the original); bad output paths failed only after a whole-chip read; the default name never collides."""
    from navi_flash import romless

    reads = []
    original = romless.read_range
    monkeypatch.setattr(romless, "read_range", lambda *a, **k: reads.append(a[1:3]) or original(*a, **k))
    (tmp_path / "img.bin").write_bytes(ifwi)
    original_backup = b"the chip as it was"
    (tmp_path / "b.bin").write_bytes(original_backup)
    sim = ("--sim", str(card_dir), "romless")
    for argv, message in (
        (("flash", str(tmp_path / "img.bin"), "--backup", str(tmp_path / "b.bin"), "--yes"), "is never overwritten"),
        (("flash", str(tmp_path / "img.bin"), "--backup", str(tmp_path / "no" / "b.bin"), "--yes"), "does not exist"),
        (("flash", str(tmp_path / "img.bin"), "--backup", str(tmp_path), "--yes"), "it is a folder"),
        (("dump", str(tmp_path / "no" / "d.bin")), "folder"),
        (("read", "0", "16", "-o", str(tmp_path / "no" / "r.bin")), "does not exist"),
        (("read", "0", "0"), "at least 1 byte"),
        (("flash", str(tmp_path / "img.bin"), "--start-sector", "600", "--dry-run"), "--start-sector 600 is outside the chip"),
        (("flash", str(tmp_path / "img.bin"), "--start-sector", "500", "--sector-count", "20", "--dry-run"), "12 sector(s) left"),
    ):
        result = run_cli(*sim, *argv)
        assert result.code == 1 and result.err.startswith("error: ") and message in result.err and result.err.count("\n") == 1, result
    assert reads == [] and (tmp_path / "b.bin").read_bytes() == original_backup
    monkeypatch.chdir(tmp_path)
    first = run_cli(*sim, "flash", str(tmp_path / "img.bin"), "--sector-count", "2", "--yes")
    second = run_cli(*sim, "flash", str(tmp_path / "img.bin"), "--sector-count", "2", "--yes")
    assert first.code == second.code == 0
    assert len(list(tmp_path.glob("navi-flash-backup-*.bin"))) == 2


def test_navi_flash_user_mistake_as_a_user_runs_it(card_dir, tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "navi_flash", "--transport", "sim", "--sim", str(card_dir), "romless", "read", "0", "0"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1 and done.stderr == "error: read SIZE must be at least 1 byte, got 0\n" and done.stdout == ""


def test_flash_summarises_identical_sectors_unless_verbose_and_info_names_the_chip(run_cli, card_dir, ifwi, tmp_path):
    """(#25 item 3) a flash listed every identical sector (510 `skip sector` lines); `info` gave no chip name or size."""
    image = bytearray(ifwi)
    image[0x3000:0x4000] = bytes(0x1000)
    (tmp_path / "img.bin").write_bytes(image)
    quiet = run_cli("--sim", str(card_dir), "romless", "flash", str(tmp_path / "img.bin"), "--no-backup", "--yes")
    assert quiet.code == 0 and "skip sector" not in quiet.out and "OK sector 003" in quiet.out
    assert "written 1, skipped 511 identical" in quiet.out
    loud = run_cli("--sim", str(card_dir), "romless", "flash", str(tmp_path / "img.bin"), "--no-backup", "--yes", "-v")
    assert loud.code == 0 and loud.out.count("skip sector") == 512
    plan = run_cli("--sim", str(card_dir), "romless", "flash", str(tmp_path / "img.bin"), "--dry-run")
    assert "plan sector" not in plan.out and "skip 512; nothing written" in plan.out
    info = run_cli("--sim", str(card_dir), "romless", "info")
    assert "chip: GD25LQ16E, 2048 KiB (512 sectors of 4 KiB)" in info.out
    data = json.loads(run_cli("--sim", str(card_dir), "romless", "info", "--json").out)
    assert data["chip"] == "GD25LQ16E" and data["size"] == 0x200000 and data["sector_size"] == 0x1000


def test_every_option_and_argument_has_help_text():
    import argparse

    from navi_flash.cli import build_parser

    missing, stack = [], [("navi-flash", build_parser())]
    while stack:
        name, parser = stack.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += [(f"{name} {sub}", p) for sub, p in action.choices.items()]
            elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)) and not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []
