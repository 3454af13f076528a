"""The activation and KV-cache parts a quantized checkpoint's config declares (quant/declared_scales.py):
any config content and any tensor inventory give findings, never an exception, and a finding
for every declared static scale that is not stored well. The written checkpoints of every scheme
are in tests/test_quant_formats_writer.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from mlperf_repro.quant.declared_scales import check_declared, declared_parts

METHODS = ("quark", "compressed-tensors", "modelopt", "mxfp4")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
spec = st.fixed_dictionaries(
    {"dtype": st.sampled_from(["fp8_e4m3", "fp4", "int8", None]), "is_dynamic": st.sampled_from([True, False, None])}
)
# Configs shaped like the tools' (so the readers' branches run), with any value where a tool has one.
quark_config = st.fixed_dictionaries(
    {
        "global_quant_config": st.fixed_dictionaries(
            {"input_tensors": st.none() | spec | st.lists(spec, max_size=2), "output_tensors": st.none() | spec}
        )
        | json_values,
        "layer_quant_config": st.dictionaries(
            st.sampled_from(["*k_proj", "*v_proj", "*q_proj", "re:.*"]),
            st.fixed_dictionaries({"output_tensors": st.none() | spec}) | json_values,
            max_size=3,
        )
        | json_values,
        "export": st.fixed_dictionaries({"kv_cache_group": st.lists(st.text(max_size=6), max_size=2)}) | json_values,
    }
)
ct_args = st.fixed_dictionaries(
    {"type": st.sampled_from(["float", "int"]), "num_bits": st.sampled_from([4, 8]), "dynamic": json_values}
)
ct_config = st.fixed_dictionaries(
    {
        "config_groups": st.dictionaries(
            st.text(max_size=6), st.fixed_dictionaries({"input_activations": st.none() | ct_args}) | json_values
        )
        | json_values,
        "kv_cache_scheme": st.none() | ct_args | json_values,
    }
)
modelopt_config = st.fixed_dictionaries({"quant_algo": json_values, "kv_cache_quant_algo": json_values})


@dataclass(frozen=True)
class Info:
    dtype: str
    shape: tuple[int, ...]


MODULES = [f"model.layers.{i}.self_attn.{p}" for i in range(2) for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
SUFFIXES = ("weight", "input_scale", "input_scale_2", "input_global_scale", "output_scale", "k_scale", "v_scale")
inventories = st.dictionaries(
    st.builds(
        lambda m, s: f"{m}.{s}", st.sampled_from(MODULES + ["model.layers.0.self_attn"]), st.sampled_from(SUFFIXES)
    ),
    st.builds(
        Info,
        st.sampled_from(["F32", "BF16", "F16", "U8", "I32", "F8_E4M3"]),
        st.lists(st.integers(0, 3), max_size=2).map(tuple),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(METHODS),
    config=quark_config | ct_config | modelopt_config | json_values,
    inventory=inventories,
    quantized=st.lists(st.sampled_from(MODULES), max_size=8, unique=True),
    value=st.floats(allow_nan=True, allow_infinity=True),
)
def test_any_config_and_inventory_give_findings_not_exceptions(method, config, inventory, quantized, value):
    config = config if isinstance(config, dict) else {"anything": config}
    parts = declared_parts(method, config)
    assert set(parts) <= {"activations", "kv_cache"}
    findings: list[tuple[str, str, str]] = []
    record = check_declared(method, config, inventory, quantized, lambda name: value, lambda *f: findings.append(f))
    assert set(record) == set(parts)
    for tensor, rule, message in findings:
        assert tensor and rule.startswith(("activation-scale", "kv-scale")) and message
    act = parts.get("activations")
    if act is not None and act.static:
        # Every quantized module either counts one good scale or has a finding naming it.
        named = {tensor.rpartition(".")[0] for tensor, rule, _ in findings if rule.startswith("activation")}
        good = record["activations"]["scales"]
        assert good + sum(1 for m in quantized if m in named) == len(quantized)
        if not (math.isfinite(value) and value > 0):
            assert good == 0


def test_quark_static_fp8_inputs_need_a_scale_per_quantized_linear():
    config = {"global_quant_config": {"input_tensors": {"dtype": "fp8_e4m3", "is_dynamic": False}}}
    inventory = {"a.q_proj.input_scale": Info("F32", ()), "a.o_proj.weight": Info("U8", (4, 2))}
    findings: list = []
    record = check_declared(
        "quark", config, inventory, ["a.q_proj", "a.o_proj"], lambda n: 0.5, lambda *f: findings.append(f)
    )
    assert record["activations"] == {
        "dtype": "fp8_e4m3",
        "static": True,
        "config_key": "global_quant_config.input_tensors",
        "scales": 1,
    }
    assert [(t, r) for t, r, _ in findings] == [("a.o_proj.input_scale", "activation-scale-missing")]


def test_dynamic_activations_and_weights_only_configs_need_no_scale():
    dynamic = {"global_quant_config": {"input_tensors": {"dtype": "fp4", "is_dynamic": True}}}
    findings: list = []
    record = check_declared("quark", dynamic, {}, ["a.q_proj"], None, lambda *f: findings.append(f))
    assert record == {
        "activations": {"dtype": "fp4", "static": False, "config_key": "global_quant_config.input_tensors"}
    }
    assert findings == []
    assert check_declared("quark", {"global_quant_config": {"input_tensors": None}}, {}, ["a"], None, print) == {}
    assert check_declared("mxfp4", {"quant_method": "mxfp4"}, {}, ["a"], None, print) == {}


def test_a_declared_kv_cache_with_no_attention_is_a_finding():
    findings: list = []
    check_declared("modelopt", {"kv_cache_quant_algo": "FP8"}, {}, [], None, lambda *f: findings.append(f))
    assert [r for _, r, _ in findings] == ["kv-scale-missing"]
