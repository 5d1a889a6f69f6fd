"""SQTT (SQ thread trace) for RDNA3, RDNA4 and CDNA: decode raw traces, map packets to instructions, print, export, encode.

    from amd_isa.sqtt import decode
    for packet in decode(open("se1.sqtt", "rb").read()):
        print(packet.time, packet.name, packet.values())
"""

from . import packets
from .cli import add_sqtt_command, run_sqtt
from .decoder import check_stream, decode, stream_layout
from .encoder import encode
from .enums import AluSrc, InstOp, InstOpCDNA, InstOpRDNA4, MemSrc, op_name
from .errors import SqttArchError, SqttCodeObjectError, SqttDecodeError, SqttEncodeError, SqttError, SqttMapError
from .layouts import LAYOUT_TYPES, LAYOUTS, PACKET_TYPES, layout_of
from .mapping import CodeText, InstructionInfo, code_map, map_insts
from .packets import Field, Packet
from .printing import NOISE, InstRow, format_inst_table, format_packet, inst_rows, is_noise, packet_lines, packet_record, print_packets
from .timeline import issue_cycles, trace_events, write_timeline

__all__ = [
    "decode", "check_stream", "encode", "map_insts", "InstructionInfo", "CodeText", "code_map", "add_sqtt_command", "run_sqtt",
    "stream_layout", "layout_of", "LAYOUTS", "LAYOUT_TYPES", "PACKET_TYPES",
    "Packet", "Field", "packets", "InstOp", "InstOpRDNA4", "InstOpCDNA", "MemSrc", "AluSrc", "op_name",
    "NOISE", "is_noise", "format_packet", "packet_lines", "print_packets", "packet_record", "InstRow", "inst_rows", "format_inst_table",
    "issue_cycles", "trace_events", "write_timeline",
    "SqttError", "SqttArchError", "SqttDecodeError", "SqttEncodeError", "SqttMapError", "SqttCodeObjectError",
]  # fmt: skip
