"""PSP mailbox and IFWI streaming against the scripted simulator; resolver against the synthetic image's known layout."""

import hashlib

import pytest
from navi_flash import PSP_ERRORS, ImageError, PSPError, PspMailbox, UsageError, resolve_ifwi_item, stream_ifwi
from navi_flash.sim import PspScript, SimCard, SimTransport

ITEMS = [*range(0x01, 0x09), *range(0x80, 0x8A)]
SGN_TABLE = 0x14000


@pytest.mark.parametrize("item", ITEMS)
def test_resolver_finds_each_item(ifwi, ifwi_layout, item):
    offset, size = ifwi_layout[item]
    assert resolve_ifwi_item(ifwi, item) == (offset, ifwi[offset : offset + size])


def test_resolver_errors(ifwi):
    broken = bytearray(ifwi)
    broken[0x2000:0x2004] = b"XXXX"
    with pytest.raises(ImageError, match="invalid PSP directory at 0x2000"):
        resolve_ifwi_item(bytes(broken), 0x02)
    broken[SGN_TABLE : SGN_TABLE + 4] = b"XXXX"
    with pytest.raises(ImageError, match=r"invalid \$SGN table pointer"):
        resolve_ifwi_item(bytes(broken), 0x84)
    with pytest.raises(ImageError, match="does not support requested item 0x42"):
        resolve_ifwi_item(ifwi, 0x42)
    duplicated = bytearray(ifwi)
    duplicated[SGN_TABLE + 0x20 : SGN_TABLE + 0x24] = (1).to_bytes(4, "little")  # two entries of type 1, none of type 2
    with pytest.raises(ImageError, match=r"missing \$SGN type 2"):
        resolve_ifwi_item(bytes(duplicated), 0x83)
    beyond = bytearray(ifwi)
    beyond[0x12018:0x1201C] = (0x300000).to_bytes(4, "little")
    with pytest.raises(ImageError, match="extends beyond IFWI"):
        resolve_ifwi_item(bytes(beyond), 0x08)


def test_all_eighteen_error_names_are_known():
    assert sorted(PSP_ERRORS) == list(range(1, 0x13)) and PSP_ERRORS[0x0C] == "write to SPI error"


def mailbox(script: PspScript) -> tuple[SimCard, PspMailbox]:
    card = SimCard(psp_script=script)
    return card, PspMailbox(SimTransport(card))


def test_probe_reads_the_four_values():
    _, box = mailbox(PspScript(boot_partition=1, fb_state=2, model_id=0xC86015, transfer_types=[0x104]))
    assert box.probe() == {"boot_partition": (0, 1), "fb_state": (0, 2), "model_id": (0, 0xC86015), "transfer_type": (0, 0x104)}


def test_gated_transfer_type_gives_the_hint():
    _, box = mailbox(PspScript(gated=True))
    assert box.probe()["transfer_type"][0] == 0x0A
    with pytest.raises(PSPError, match="partition update error.*gated"):
        box.require(0x07, name="GET_TRANSFER_TYPE")


def test_not_ready_mailbox_is_refused():
    _, box = mailbox(PspScript(not_ready=True))
    with pytest.raises(PSPError, match="not ready"):
        box.command(0x01)


def test_ifwi_all_streams_each_requested_item_and_stops_after_phase_2(ifwi, ifwi_layout):
    states = [0x001, 0x080, 0x081, 0x084, 0x008, 0x205, 0x006]
    card, box = mailbox(PspScript(transfer_types=states))
    streamed = stream_ifwi(box, ifwi)
    assert [state for state, _ in streamed] == states[:6]
    expected = [hashlib.sha256(ifwi[o : o + s]).hexdigest() for o, s in (ifwi_layout[state & 0xFF] for state in states[:6])]
    assert [entry["sha256"] for entry in card.psp.received] == expected
    assert all(entry["complete"] for entry in card.psp.received)


def test_ifwi_all_gives_up_after_19_items(ifwi):
    card, box = mailbox(PspScript(transfer_types=[0x080] * 25))
    card.psp.script.latency = 0
    with pytest.raises(PSPError, match="after 19 items"):
        stream_ifwi(box, ifwi)
    assert len(card.psp.received) == 19


def test_interrupted_stream_sends_end_once_with_partial_size():
    card, box = mailbox(PspScript(transfer_types=[0x004], errors={0x09: (5, 0x0D)}))
    with pytest.raises(PSPError, match="DATA_TRANSFER@0x10 failed: error=0xd \\(signature validation error\\)"):
        box.stream(bytes(range(64)), 0x04)
    assert card.psp.counts[0x0A] == 1
    assert card.psp.received[-1]["end"] == (16 << 8) | 0x04 and not card.psp.received[-1]["complete"]


def test_rejected_end_is_not_sent_twice():
    card, box = mailbox(PspScript(transfer_types=[0x004], errors={0x0A: (1, 0x0C)}))
    with pytest.raises(PSPError, match="END_TRANSFER failed: error=0xc"):
        box.stream(bytes(64), 0x04)
    assert card.psp.counts[0x0A] == 1


def test_ctrl_c_during_stream_ends_the_session(monkeypatch):
    card, box = mailbox(PspScript(transfer_types=[0x004], latency=0))
    real = card.psp.write
    calls = {"data": 0}

    def write(offset, value):
        real(offset, value)
        if offset == 0x58224 and card.psp.command_reg >> 16 & 0xFF == 0x09:
            calls["data"] += 1
            if calls["data"] == 3:  # Ctrl-C while the third dword is in flight
                raise KeyboardInterrupt

    monkeypatch.setattr(card.psp, "write", write)
    with pytest.raises(KeyboardInterrupt):
        box.stream(bytes(64), 0x04)
    assert card.psp.counts[0x0A] == 1 and card.psp.received[-1]["end"] == (8 << 8) | 0x04


def test_stream_checks_its_arguments():
    _, box = mailbox(PspScript(transfer_types=[0x004]))
    for payload, item in ((b"", 4), (b"abc", 4), (bytes(4), 0x100)):
        with pytest.raises(UsageError):
            box.stream(payload, item)
    with pytest.raises(PSPError, match="requests item 0x4, not 0x5"):
        box.stream(bytes(4), 0x05)


def test_synthetic_images_differ_per_seed(ifwi_factory):
    assert ifwi_factory(1) != ifwi_factory(2)
