"""Exact numerics of the MX (E2M1/E2M3/E3M2 + E8M0), FP8 E4M3 and NVFP4 codecs (quant/mx.py, fp8.py, nvfp4.py).

Every expected value below is written out by hand or computed by an independent scalar
reference (Python floats, nearest value with ties to the even code), never by the codec.
"""

from __future__ import annotations

import math
import struct

import pytest
import torch

from mlperf_repro.quant import fp8, mx, mxfp4, nvfp4
from mlperf_repro.quant.minifloat import MiniFloat

# Hand-written value tables (magnitude codes 0..31 / 0..7), from OCP MX v1.0 §5.3.
E2M1_TABLE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
E2M3_TABLE = [i / 8 for i in range(8)] + [(1 + m / 8) * 2.0**e for e in range(3) for m in range(8)]
E3M2_TABLE = [i / 16 for i in range(4)] + [(1 + m / 4) * 2.0**e for e in range(-2, 5) for m in range(4)]
TABLES = {"e2m1": E2M1_TABLE, "e2m3": E2M3_TABLE, "e3m2": E3M2_TABLE}
MAX = {"e2m1": 6.0, "e2m3": 7.5, "e3m2": 28.0}
MIN_SUB = {"e2m1": 0.5, "e2m3": 0.125, "e3m2": 0.0625}
EMAX = {"e2m1": 2, "e2m3": 2, "e3m2": 4}
MBITS = {"e2m1": 1, "e2m3": 3, "e3m2": 2}


def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def _next_up(v: float) -> float:
    return float(torch.nextafter(torch.tensor(v), torch.tensor(math.inf)))


def _next_down(v: float) -> float:
    return float(torch.nextafter(torch.tensor(v), torch.tensor(-math.inf)))


def _ulp32(v: float) -> float:
    return 2.0 ** (math.frexp(abs(v))[1] - 24)


def _ref_code(v: float, table: list[float]) -> int:
    """Independent reference: index of the nearest table magnitude, ties to the even index, saturating."""
    a = min(abs(v), table[-1])
    return min(range(len(table)), key=lambda c: (abs(a - table[c]), c % 2))


def _t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


# ============================================================================ MX elements


def test_tables_match_the_spec_ranges():
    assert {name: len(table) for name, table in TABLES.items()} == {"e2m1": 8, "e2m3": 32, "e3m2": 32}
    for name, table in TABLES.items():
        assert table == sorted(table) and table[-1] == MAX[name] and table[1] == MIN_SUB[name]
    assert E2M3_TABLE[:8] == [0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875]  # subnormals
    assert E3M2_TABLE[:4] == [0, 0.0625, 0.125, 0.1875]  # subnormals


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2"])
def test_every_code_decodes_to_its_table_value(name):
    fmt = mx.element_format(name)
    table = TABLES[name]
    n = len(table)
    values = fmt.decode(torch.arange(2 * n, dtype=torch.uint8)).tolist()
    assert values[:n] == table
    assert values[n:] == [-v for v in table]
    assert math.copysign(1.0, values[n]) == -1.0  # sign bit + zero magnitude is -0.0
    assert fmt.max_value == MAX[name] and fmt.min_subnormal == MIN_SUB[name] and fmt.emax == EMAX[name]
    with pytest.raises(ValueError):
        fmt.decode(torch.tensor([2 * n], dtype=torch.uint8))


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2"])
def test_every_code_round_trips_and_minus_zero_is_written_as_plus_zero(name):
    fmt = mx.element_format(name)
    n = len(TABLES[name])
    codes = torch.arange(2 * n, dtype=torch.uint8)
    back = fmt.encode(fmt.decode(codes), negative_zero=False)
    expected = codes.clone()
    expected[n] = 0
    assert torch.equal(back, expected)


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2"])
def test_midpoints_and_their_neighbours_match_the_scalar_reference(name):
    table = TABLES[name]
    fmt = mx.element_format(name)
    probes = []
    for a, b in zip(table[:-1], table[1:], strict=True):
        mid = (a + b) / 2
        probes += [a, mid, _next_down(mid), _next_up(mid), b]
    probes += [MAX[name] + 0.25, MAX[name] * 1.5, 1e30]
    probes += [-p for p in probes]
    got = fmt.encode(_t(probes), negative_zero=False).tolist()
    n = len(table)
    for p, code in zip(probes, got, strict=True):
        ref = _ref_code(p, table)
        if p < 0 and ref != 0:
            ref |= n
        assert code == ref, (name, p, code, ref)


# Ties, hand-picked: (value, expected decoded value). The even code wins.
TIES = {
    "e2m1": [(0.25, 0.0), (0.75, 1.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (3.5, 4.0), (5.0, 4.0)],
    "e2m3": [(0.0625, 0.0), (0.1875, 0.25), (0.9375, 1.0), (2.125, 2.0), (2.375, 2.5), (7.25, 7.0), (3.875, 4.0)],
    "e3m2": [(0.03125, 0.0), (0.09375, 0.125), (0.21875, 0.25), (18.0, 16.0), (22.0, 24.0), (26.0, 24.0)],
}


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2"])
def test_ties_round_to_even(name):
    fmt = mx.element_format(name)
    values = [v for v, _ in TIES[name]]
    expected = [e for _, e in TIES[name]]
    assert fmt.decode(fmt.encode(_t(values), negative_zero=False)).tolist() == expected
    neg = fmt.decode(fmt.encode(-_t(values), negative_zero=False)).tolist()
    assert neg == [-e if e else 0.0 for e in expected]


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2"])
def test_values_beyond_max_saturate(name):
    fmt = mx.element_format(name)
    m = MAX[name]
    x = _t([m, _next_up(m), m + 1, 2 * m, 1e38, math.inf, -_next_up(m), -1e38, -math.inf])
    assert fmt.decode(fmt.encode(x, negative_zero=False)).tolist() == [m] * 6 + [-m] * 3
    with pytest.raises(ValueError, match="NaN"):
        fmt.encode(_t([math.nan]), negative_zero=False)


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2"])
def test_subnormals(name):
    fmt = mx.element_format(name)
    sub = MIN_SUB[name]
    n_sub = 2 ** MBITS[name]
    # every subnormal code is k * min_subnormal
    assert fmt.decode(torch.arange(n_sub, dtype=torch.uint8)).tolist() == [k * sub for k in range(n_sub)]
    # half the smallest subnormal is a tie to 0; just above it rounds up to the smallest subnormal
    x = _t([sub / 2, _next_up(sub / 2), sub, 1.5 * sub, 1e-30])
    assert fmt.decode(fmt.encode(x, negative_zero=False)).tolist() == [0.0, sub, sub, 2 * sub, 0.0]


# ============================================================================ FP6 packing


def test_pack_fp6_layout_by_hand():
    # v0..v3 = 1, 2, 3, 4: word = v0 | v1<<6 | v2<<12 | v3<<18 -> bytes 0x81, 0x30, 0x10 (LSB first)
    codes = torch.tensor([[1, 2, 3, 4]], dtype=torch.uint8)
    assert mx.pack_fp6(codes).tolist() == [[0x81, 0x30, 0x10]]
    # element i sits at bit 6*i of the little-endian bit stream
    one_hot = torch.zeros(4, 4, dtype=torch.uint8)
    for i in range(4):
        one_hot[i, i] = 0x3F
    bits = [int.from_bytes(bytes(row), "little") for row in mx.pack_fp6(one_hot).tolist()]
    assert bits == [0x3F << (6 * i) for i in range(4)]


def _quark_pack_fp6_reference(codes: list[int]) -> list[int]:
    """Quark >= 0.10 Pack_fp6 layout as its comment draws it: byte2 | byte1 | byte0, written in that order."""
    out = []
    for i in range(0, len(codes), 4):
        v0, v1, v2, v3 = codes[i : i + 4]
        byte2 = (v0 & 0x3F) | ((v1 & 0x3) << 6)  # |v1 2b|v0 6b|
        byte1 = (v1 >> 2) | ((v2 & 0xF) << 4)  # |v2 4b|v1 4b|
        byte0 = (v2 >> 4) | (v3 << 2)  # |v3 6b|v2 2b|
        out += [byte2, byte1, byte0]
    return out


def test_pack_fp6_matches_quark_layout_and_round_trips():
    gen = torch.Generator().manual_seed(6)
    codes = torch.randint(0, 64, (3, 64), dtype=torch.uint8, generator=gen)
    packed = mx.pack_fp6(codes)
    assert packed.shape == (3, 48)
    for row_c, row_p in zip(codes.tolist(), packed.tolist(), strict=True):
        assert row_p == _quark_pack_fp6_reference(row_c)
    assert torch.equal(mx.unpack_fp6(packed), codes)
    with pytest.raises(ValueError):
        mx.pack_fp6(torch.tensor([64, 0, 0, 0], dtype=torch.uint8))
    with pytest.raises(ValueError):
        mx.pack_fp6(torch.zeros(6, dtype=torch.uint8))


# ============================================================================ E8M0 scale rules


# (element, amax, floor exponent, even exponent)
SCALE_CASES = [
    ("e2m1", 6.0, 0, 0),
    ("e2m1", _next_down(7.0), 0, 0),  # significand just below 1.75
    ("e2m1", 7.0, 0, 1),  # 1.75 * 4: the tie goes up
    ("e2m1", 7.9, 0, 1),
    ("e2m1", 8.0, 1, 1),
    ("e2m3", 7.5, 0, 0),  # 1.875 * 4: below E2M3's threshold 1.9375
    ("e2m3", _next_down(7.75), 0, 0),
    ("e2m3", 7.75, 0, 1),  # 1.9375 * 4: tie between mantissa 111 (odd) and 2.0 (even): up
    ("e2m3", 1.0, -2, -2),
    ("e3m2", 28.0, 0, 0),  # 1.75 * 16, below E3M2's threshold 1.875
    ("e3m2", _next_down(30.0), 0, 0),
    ("e3m2", 30.0, 0, 1),  # 1.875 * 16: up
    ("e3m2", 1.0, -4, -4),
    ("e3m2", 0.0, -127, -127),  # zero block: byte 0
    ("e2m3", 2.0**-126, -127, -127),  # clamped to the E8M0 range
]


@pytest.mark.parametrize(("name", "amax", "floor_exp", "even_exp"), SCALE_CASES)
def test_scale_exponent_rules(name, amax, floor_exp, even_exp):
    a = _t([amax])
    assert mx.scale_exponents(a, name, "floor").tolist() == [floor_exp]
    assert mx.scale_exponents(a, name, "even").tolist() == [even_exp]


def test_e2m1_scale_exponents_equal_mxfp4s():
    gen = torch.Generator().manual_seed(1)
    amax = torch.cat([torch.rand(4096, generator=gen) * 2.0 ** torch.randint(-140, 120, (4096,), generator=gen)])
    amax = torch.cat([amax, _t([0.0, 1.75, 7.0, 3.5, 2.0**-149, 3e38])])
    for mode in mx.SCALE_MODES:
        assert torch.equal(mx.scale_exponents(amax, "e2m1", mode), mxfp4.scale_exponents(amax, mode))


def _block(amax: float, fill: float = 0.5) -> torch.Tensor:
    b = torch.full((1, 32), fill)
    b[0, 3] = amax
    return b


def test_floor_and_even_differ_on_a_block_e2m3():
    w = _block(7.75)
    st_f, sc_f = mx.MXFP6_E2M3.quantize(w, "floor")
    st_e, sc_e = mx.MXFP6_E2M3.quantize(w, "even")
    assert sc_f.tolist() == [[127]] and sc_e.tolist() == [[128]]
    d_f = mx.MXFP6_E2M3.dequantize(st_f, sc_f)
    d_e = mx.MXFP6_E2M3.dequantize(st_e, sc_e)
    assert d_f[0, 3].item() == 7.5  # saturated to max * 1
    assert d_e[0, 3].item() == 8.0  # 7.75 / 2 = 3.875 is a tie -> 4.0 (even), times 2
    assert d_f[0, 0].item() == 0.5 and d_e[0, 0].item() == 0.5


def test_floor_and_even_differ_on_a_block_e3m2_and_agree_below_the_threshold():
    st_f, sc_f = mx.MXFP6_E3M2.quantize(_block(30.0), "floor")
    st_e, sc_e = mx.MXFP6_E3M2.quantize(_block(30.0), "even")
    assert sc_f.tolist() == [[127]] and sc_e.tolist() == [[128]]
    assert mx.MXFP6_E3M2.dequantize(st_f, sc_f)[0, 3].item() == 28.0
    assert mx.MXFP6_E3M2.dequantize(st_e, sc_e)[0, 3].item() == 32.0  # 15 -> 16 (tie 14|16: even 16) * 2
    for amax in (28.0, 29.0):
        a = mx.MXFP6_E3M2.quantize(_block(amax), "floor")
        b = mx.MXFP6_E3M2.quantize(_block(amax), "even")
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_zero_block_gets_byte_zero_and_decodes_to_zero():
    for codec in mx.CODECS.values():
        st, sc = codec.quantize(torch.zeros(2, 64), "even")
        assert sc.tolist() == [[0, 0], [0, 0]] and not st.any()
        assert torch.equal(codec.dequantize(st, sc), torch.zeros(2, 64))


# ============================================================================ MX codecs


@pytest.mark.parametrize("mode", ["even", "floor"])
def test_generic_mxfp4_writes_the_same_bytes_as_mxfp4(mode):
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(16, 256, generator=gen) * 2.0 ** torch.randint(-20, 20, (16, 1), generator=gen)
    w[0, :32] = _t([7.0, -3.5, 0.25, -0.25, 1.75] + [0.0] * 27)
    a = mx.MXFP4.quantize(w, mode)
    b = mxfp4.quantize_mxfp4(w, mode)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(mx.MXFP4.dequantize(*a), mxfp4.dequantize_mxfp4(*b))


def _spacing(a: torch.Tensor, fmt: MiniFloat) -> torch.Tensor:
    """Grid spacing of ``fmt`` in the binade that contains ``a`` (>= 0)."""
    _, e = torch.frexp(torch.clamp(a, min=fmt.min_normal))
    return torch.ldexp(torch.ones_like(a), (e - 1 - fmt.mbits).to(torch.int32))


@pytest.mark.parametrize("codec_name", sorted(mx.CODECS))
@pytest.mark.parametrize("mode", ["even", "floor"])
def test_mx_random_error_is_at_most_half_an_ulp_times_the_scale(codec_name, mode):
    codec = mx.CODECS[codec_name]
    fmt = codec.element
    gen = torch.Generator().manual_seed(3)
    exps = torch.randint(-30, 30, (32, 16, 1), generator=gen).to(torch.float32)
    w = (torch.randn(32, 16, 32, generator=gen) * 2.0**exps).reshape(32, 512)
    stored, scales = codec.quantize(w, mode)
    back = codec.dequantize(stored, scales)
    x = mxfp4.e8m0_decode(scales).repeat_interleave(32, dim=-1)
    a = w.abs() / x
    err = (w - back).abs()
    saturated = a > fmt.max_value
    inside = ~saturated
    assert bool((err[inside] <= 0.5 * _spacing(a[inside], fmt) * x[inside]).all())
    # saturated elements decode to exactly +-max * X
    assert torch.equal(back[saturated].abs(), fmt.max_value * x[saturated])
    if mode == "even":  # with the rounded scale the block max never exceeds max + half a spacing
        assert bool((err <= 0.5 * _spacing(a, fmt) * x).all())


@pytest.mark.parametrize("codec_name", sorted(mx.CODECS))
@pytest.mark.parametrize("mode", ["even", "floor"])
def test_mx_quantize_dequantize_quantize_is_idempotent(codec_name, mode):
    codec = mx.CODECS[codec_name]
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(8, 3, 128, generator=gen) * 3
    stored, scales = codec.quantize(w, mode)
    assert stored.shape == (8, 3, 128 * codec.element.bits // 8) and scales.shape == (8, 3, 4)
    back = codec.dequantize(stored, scales, torch.float32)
    stored2, scales2 = codec.quantize(back, mode)
    assert torch.equal(stored, stored2) and torch.equal(scales, scales2)
    assert torch.equal(codec.dequantize(stored2, scales2), back)
    assert codec.dequantize(stored, scales, torch.bfloat16).dtype == torch.bfloat16


def test_mx_rejects_bad_input():
    with pytest.raises(ValueError, match="multiple of 32"):
        mx.MXFP6_E2M3.quantize(torch.zeros(4, 48))
    with pytest.raises(ValueError, match="NaN or Inf"):
        mx.MXFP6_E3M2.quantize(torch.full((1, 32), math.inf))
    with pytest.raises(ValueError, match="scale_mode"):
        mx.MXFP6_E3M2.quantize(torch.zeros(1, 32), "ceil")
    with pytest.raises(ValueError, match="bytes"):
        mx.MXFP6_E2M3.dequantize(torch.zeros(1, 16, dtype=torch.uint8), torch.zeros(1, 1, dtype=torch.uint8))
    with pytest.raises(ValueError, match="unknown MX element"):
        mx.element_format("e5m2")
    assert mx.element_format("fp6_e2m3") is mx.E2M3


# ============================================================================ FP8 E4M3


def _e4m3_reference(code: int) -> float:
    s, e, m = code >> 7, (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return math.nan
    v = m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


def test_e4m3_every_code_decodes_to_the_formula():
    got = fp8.e4m3_decode(torch.arange(256, dtype=torch.uint8)).tolist()
    for code, v in enumerate(got):
        ref = _e4m3_reference(code)
        assert (math.isnan(v) and math.isnan(ref)) or v == ref, (hex(code), v, ref)
    assert got[0x7E] == 448.0 and got[0xFE] == -448.0
    assert got[0x01] == 2.0**-9 and got[0x08] == 2.0**-6  # smallest subnormal, smallest normal
    assert math.isnan(got[0x7F]) and math.isnan(got[0xFF])
    assert sum(math.isnan(v) for v in got) == 2  # no Inf, two NaN codes


def test_e4m3_rounding_by_hand():
    cases = [
        (2.0**-10, 0x00),  # half the smallest subnormal: tie -> 0 (even)
        (_next_up(2.0**-10), 0x01),
        (2.0**-9, 0x01),
        (3 * 2.0**-10, 0x02),  # tie between 2^-9 (code 1) and 2^-8 (code 2): even
        (1.0625, 0x38),  # tie 1.0 | 1.125 -> 1.0
        (1.1875, 0x3A),  # tie 1.125 | 1.25 -> 1.25
        (400.0, 0x7C),  # tie 384 (0x7C) | 416 (0x7D) -> 384
        (432.0, 0x7E),  # tie 416 (0x7D) | 448 (0x7E) -> 448
        (448.0, 0x7E),
        (464.0, 0x7E),  # would be the tie to 480: saturates
        (1e9, 0x7E),
        (math.inf, 0x7E),
        (-math.inf, 0xFE),
        (-0.0, 0x80),
        (-(2.0**-11), 0x80),  # negative underflow keeps its sign
        (math.nan, 0x7F),
    ]
    got = fp8.e4m3_encode(_t([v for v, _ in cases])).tolist()
    assert got == [c for _, c in cases]


def test_e4m3_agrees_with_torch_bit_for_bit_in_range():
    table = fp8.e4m3_decode(torch.arange(256, dtype=torch.uint8))
    finite = table[~torch.isnan(table)]
    mids = fp8.E4M3.midpoints()
    gen = torch.Generator().manual_seed(5)
    rand = (torch.rand(200_000, generator=gen) * 2 - 1) * 2.0 ** torch.randint(-14, 9, (200_000,), generator=gen)
    probes = torch.cat([finite, mids, -mids, torch.nextafter(mids, mids * 2), torch.nextafter(mids, mids * 0), rand])
    probes = probes[probes.abs() <= 448]
    ours = fp8.e4m3_encode(probes)
    theirs = probes.to(torch.float8_e4m3fn).view(torch.uint8)
    assert torch.equal(ours, theirs)


def test_e4m3_out_of_range_saturates_torch_saturates_or_gives_nan():
    x = _t([_next_up(448.0), 463.0, 464.0, 480.0, 1e6, math.inf, -1e6, -math.inf])
    ours = fp8.e4m3_encode(x)
    assert ours.tolist() == [0x7E] * 6 + [0xFE] * 2
    theirs = x.to(torch.float8_e4m3fn).view(torch.uint8)
    # torch 2.13 CPU saturates like us; other builds may return NaN (0x7F/0xFF) beyond the range
    assert bool(((theirs == ours) | ((theirs & 0x7F) == 0x7F)).all())


def test_fp8_per_tensor_scale_and_round_trip():
    w = _t([[0.0, 1.0, -2.0, 3.5], [0.001, -7.0, 0.5, 6.0]])
    stored, scale = fp8.quantize_fp8(w)
    assert stored.dtype == torch.float8_e4m3fn and scale.shape == ()
    assert scale.item() == _f32(7.0 / 448)
    codes = stored.view(torch.uint8)
    assert codes[1, 1].item() == 0xFE  # the amax element is -448
    back = fp8.dequantize_fp8(stored, scale)
    stored2, scale2 = fp8.quantize_fp8(back)
    assert torch.equal(stored2.view(torch.uint8), codes)
    assert abs(scale2.item() - scale.item()) <= 2 * _ulp32(scale.item())
    # all-zero tensor: scale 1, zeros
    z, zs = fp8.quantize_fp8(torch.zeros(3, 4))
    assert zs.item() == 1.0 and not z.view(torch.uint8).any()


def test_fp8_channel_scales_and_static_scale_saturation():
    w = _t([[1.0, -2.0], [100.0, 3.0]])
    stored, scale = fp8.quantize_fp8(w, "channel")
    assert scale.shape == (2, 1) and scale.flatten().tolist() == [_f32(2.0 / 448), _f32(100.0 / 448)]
    # a calibrated activation scale: values beyond 448 * scale saturate
    act_scale = fp8.scale_from_amax(4.0)
    assert act_scale.item() == _f32(4.0 / 448)
    q, s = fp8.quantize_fp8(_t([1.0, 4.0, 10.0, -50.0]), scale=act_scale)
    assert q.view(torch.uint8).tolist() == [fp8.e4m3_encode(_t([1.0]) / act_scale).item(), 0x7E, 0x7E, 0xFE]
    assert q.view(torch.uint8)[0].item() == 0x6E  # 1 / (4/448) = 112 = 1.75 * 2**6: exponent 13, mantissa 6
    back = fp8.dequantize_fp8(q, s)
    assert back.tolist()[1:] == [_f32(448 * act_scale.item())] * 2 + [-_f32(448 * act_scale.item())]


def test_fp8_random_error_bound():
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(64, 256, generator=gen) * 0.05
    stored, scale = fp8.quantize_fp8(w)
    back = fp8.dequantize_fp8(stored, scale)
    a = (w / scale).abs()
    bound = 0.5 * _spacing(a, fp8.E4M3) * scale * (1 + 2.0**-20)
    assert bool(((w - back).abs() <= bound).all())


def test_kv_cache_scales():
    scales = fp8.kv_cache_scales({0: (448.0, 224.0), 1: (0.0, 3.0)})
    assert scales[0][0].item() == 1.0 and scales[0][1].item() == 0.5
    assert scales[1][0].item() == 1.0  # amax 0 -> vLLM's default 1.0
    assert scales[1][1].item() == _f32(3.0 / 448)
    assert scales[1][1].dtype == torch.float32 and scales[1][1].shape == ()
    with pytest.raises(ValueError):
        fp8.kv_cache_scales({0: (math.inf, 1.0)})


# ============================================================================ NVFP4


def _ue4m3(v: float) -> int:
    return fp8.e4m3_encode(_t([v])).item()


def test_nvfp4_block_scales_by_hand():
    # tensor amax 2688 -> s_tensor = 1 exactly, so block scale = E4M3(block amax / 6)
    blocks = [2688.0, 60.0, 6 * 1.0625, 6 * 1.1875, 0.0, 6 * 3 * 2.0**-10, 6 * 2.0**-10]
    w = torch.zeros(1, 16 * len(blocks))
    for i, amax in enumerate(blocks):
        w[0, 16 * i] = amax
        w[0, 16 * i + 1] = -amax / 2
    packed, bscale, g = nvfp4.quantize_nvfp4(w)
    assert g.item() == 1.0 and g.dtype == torch.float32 and g.shape == ()
    assert bscale.dtype == torch.float8_e4m3fn and bscale.shape == (1, len(blocks))
    expected = [
        0x7E,
        _ue4m3(10.0),
        0x38,
        0x3A,
        0x38,
        0x02,
        0x00,
    ]  # 448, 10, 1.0 (tie), 1.25 (tie), 1.0 (zero block), 2^-8 (tie), 0 (underflow)
    assert bscale.view(torch.uint8).tolist() == [expected]
    back = nvfp4.dequantize_nvfp4(packed, bscale, torch.float32, g)
    vals = back.reshape(len(blocks), 16)[:, :2].tolist()
    assert vals[0] == [2688.0, -1344.0]
    assert vals[1] == [60.0, -30.0]
    assert vals[2] == [6.0, -3.0]  # 6.375 / 1.0 saturates to 6; 3.1875 -> 3
    assert vals[3] == [7.5, -3.75]  # 7.125 / 1.25 = 5.7 -> 6; 3.5625/1.25 = 2.85 -> 3
    assert vals[4] == [0.0, 0.0]
    assert vals[6] == [0.0, 0.0]  # block scale underflowed: zeros, no NaN


def test_nvfp4_tensor_scale():
    gen = torch.Generator().manual_seed(8)
    amaxes = torch.rand(20_000, generator=gen) * 2.0 ** torch.randint(-20, 20, (20_000,), generator=gen)
    plain_differs = 0
    for a in amaxes[:2000].tolist():
        plain = nvfp4.tensor_scale(a, exact_reciprocal=False)
        assert plain.item() == _f32(_f32(a) / 2688)  # ModelOpt's amax / (6 * 448), to the bit
        s = nvfp4.tensor_scale(a)
        assert torch.equal(1.0 / (1.0 / s), s)  # round-trips through the reciprocal
        assert abs(s.item() - plain.item()) <= _ulp32(plain.item())
        plain_differs += s.item() != plain.item()
    assert 0 < plain_differs < 2000 * 0.3  # ~17 % of float32 values are not reciprocals
    assert nvfp4.tensor_scale(0.0).item() == 1.0


@pytest.mark.parametrize("exact_reciprocal", [True, False])
def test_nvfp4_both_conventions_decode_identically(exact_reciprocal):
    gen = torch.Generator().manual_seed(9)
    w = torch.randn(32, 128, generator=gen) * 0.02
    p1, b1, s = nvfp4.quantize_nvfp4(w, "weight_scale_2", exact_reciprocal=exact_reciprocal)
    p2, b2, g = nvfp4.quantize_nvfp4(w, "weight_global_scale", exact_reciprocal=exact_reciprocal)
    d1 = nvfp4.dequantize_nvfp4(p1, b1, torch.float32, s, scale_mode="weight_scale_2")
    d2 = nvfp4.dequantize_nvfp4(p2, b2, torch.float32, g, scale_mode="weight_global_scale")
    assert torch.equal(g, 1.0 / s)
    if exact_reciprocal:
        assert torch.equal(p1, p2) and torch.equal(b1.view(torch.uint8), b2.view(torch.uint8))
        assert torch.equal(d1, d2)
    # converting the global scale gives the other convention's decode exactly
    s_from_g = nvfp4.convert_global_scale(g, "weight_global_scale", "weight_scale_2")
    assert torch.equal(nvfp4.dequantize_nvfp4(p2, b2, torch.float32, s_from_g), d2)


def test_nvfp4_conversion_is_exact_both_ways():
    gen = torch.Generator().manual_seed(10)
    w = torch.randn(16, 64, generator=gen)
    packed, bs, s = nvfp4.quantize_nvfp4(w)
    g = nvfp4.convert_global_scale(s, "weight_scale_2", "weight_global_scale")
    assert torch.equal(nvfp4.convert_global_scale(g, "weight_global_scale", "weight_scale_2"), s)
    ref = nvfp4.dequantize_nvfp4(packed, bs, torch.float32, s)
    assert torch.equal(nvfp4.dequantize_nvfp4(packed, bs, torch.float32, g, scale_mode="weight_global_scale"), ref)
    # a checkpoint's tensors, ModelOpt names -> compressed-tensors names and back
    modelopt = {"weight": packed, "weight_scale": bs, "weight_scale_2": s, "input_scale": torch.tensor(0.5)}
    ct = nvfp4.convert_checkpoint_tensors(modelopt, "weight_scale_2", "weight_global_scale")
    assert set(ct) == {"weight", "weight_scale", "weight_global_scale", "input_scale"}
    assert ct["weight"] is packed and ct["input_scale"].item() == 0.5
    back = nvfp4.convert_checkpoint_tensors(ct, "weight_global_scale", "weight_scale_2")
    assert torch.equal(back["weight_scale_2"], s)
    # llm-compressor's bfloat16-rounded global scale (8096): converts exactly; converting back
    # gives a float32 that decodes identically (8095.9995: several float32 share one reciprocal)
    g_bf16 = torch.tensor([8096.0])
    s_ct = nvfp4.convert_global_scale(g_bf16, "weight_global_scale", "weight_scale_2")
    assert s_ct.shape == (1,) and s_ct.item() == _f32(1 / 8096)
    g_back = nvfp4.convert_global_scale(s_ct, "weight_scale_2", "weight_global_scale")
    a = nvfp4.dequantize_nvfp4(packed, bs, torch.float32, g_bf16, scale_mode="weight_global_scale")
    assert torch.equal(a, nvfp4.dequantize_nvfp4(packed, bs, torch.float32, s_ct))
    assert torch.equal(a, nvfp4.dequantize_nvfp4(packed, bs, torch.float32, g_back, scale_mode="weight_global_scale"))


def test_nvfp4_non_reciprocal_scale_cannot_convert_exactly():
    # find a float32 s that is not the float32 reciprocal of any float32
    candidates = (torch.arange(1 << 12, dtype=torch.int32) + 0x3FC00000).view(torch.float32)  # from 1.5 up
    s = candidates[(1.0 / (1.0 / candidates)) != candidates][0]
    with pytest.raises(ValueError, match="exact=False"):
        nvfp4.convert_global_scale(s, "weight_scale_2", "weight_global_scale")
    g = nvfp4.convert_global_scale(s, "weight_scale_2", "weight_global_scale", exact=False)
    assert g.item() == _f32(1.0 / s.item())


def test_nvfp4_round_trip_is_idempotent_and_error_bounded():
    gen = torch.Generator().manual_seed(11)
    w = torch.randn(4, 32, 256, generator=gen) * 0.03
    for mode in nvfp4.SCALE_MODES:
        packed, bs, gs = nvfp4.quantize_nvfp4(w, mode)
        back = nvfp4.dequantize_nvfp4(packed, bs, torch.float32, gs, scale_mode=mode)
        p2, b2, g2 = nvfp4.quantize_nvfp4(back, mode)
        assert torch.equal(p2, packed) and torch.equal(b2.view(torch.uint8), bs.view(torch.uint8))
        assert torch.equal(nvfp4.dequantize_nvfp4(p2, b2, torch.float32, g2, scale_mode=mode), back)
        s_eff = nvfp4.effective_tensor_scale(gs, mode)
        denom = (fp8.e4m3_decode(bs) * s_eff).repeat_interleave(16, dim=-1)
        a = w.abs() / denom
        bound = 0.5 * _spacing(a, mx.E2M1) * denom * (1 + 2.0**-20)
        assert bool(((w - back).abs() <= bound).all())


def test_nvfp4_static_amax_and_bad_input():
    x = _t([[1.0] * 15 + [100.0]])
    packed, bs, s = nvfp4.quantize_nvfp4(x, amax=2688.0)  # calibrated amax; s = 1
    assert s.item() == 1.0
    assert nvfp4.dequantize_nvfp4(packed, bs, torch.float32, s)[0, -1].item() == 96.0  # 100/16.67 -> 6 * E4M3(16.67)=16
    with pytest.raises(ValueError, match="required"):
        nvfp4.dequantize_nvfp4(packed, bs)
    with pytest.raises(ValueError, match="negative block scale"):
        nvfp4.dequantize_nvfp4(packed, bs.view(torch.uint8) | 0x80, torch.float32, s)
    with pytest.raises(ValueError, match="multiple of 16"):
        nvfp4.quantize_nvfp4(torch.zeros(1, 24))
    with pytest.raises(ValueError, match="scale_mode"):
        nvfp4.quantize_nvfp4(torch.zeros(1, 16), "global")


def test_row_chunking_does_not_change_the_bytes(monkeypatch):
    gen = torch.Generator().manual_seed(12)
    w = torch.randn(10, 3, 64, generator=gen)
    whole = [mx.MXFP6_E2M3.quantize(w), nvfp4.quantize_nvfp4(w)]
    monkeypatch.setattr(mx, "_CHUNK_ELEMENTS", 64)
    monkeypatch.setattr(nvfp4, "_CHUNK_ELEMENTS", 64)
    chunked = [mx.MXFP6_E2M3.quantize(w), nvfp4.quantize_nvfp4(w)]

    def raw(t: torch.Tensor) -> torch.Tensor:
        return t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t

    for a, b in zip(whole, chunked, strict=True):
        assert all(torch.equal(raw(ta), raw(tb)) for ta, tb in zip(a, b, strict=True))
    assert torch.equal(mx.MXFP6_E2M3.dequantize(*chunked[0]), mx.MXFP6_E2M3.dequantize(*whole[0]))
    p, b, g = chunked[1]
    assert nvfp4.dequantize_nvfp4(p, b, torch.float32, g).shape == (10, 3, 64)
