"""The benchmark reports the CPU features that decide bf16 speed (hardening item 14)."""
from __future__ import annotations

from disentangle.bench import cpu_capabilities


def test_cpu_capabilities_reads_bf16_flags(tmp_path):
    with_bf16 = tmp_path / "cpuinfo_bf16"
    with_bf16.write_text(
        "processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
        "processor\t: 1\nmodel name\t: Some Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    )
    caps = cpu_capabilities(str(with_bf16))
    assert caps["cpu_model"] == "Some Xeon"
    assert caps["bf16_flags"] == "amx_bf16 amx_tile avx512_bf16"
    assert caps["native_bf16"] == "yes"
    without = tmp_path / "cpuinfo_plain"
    without.write_text("model name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n")
    caps = cpu_capabilities(str(without))
    assert (caps["bf16_flags"], caps["native_bf16"]) == ("none", "no")
    assert caps["torch_cpu_capability"]  # torch's own reading, e.g. AVX2 or AVX512
    missing = cpu_capabilities(str(tmp_path / "absent"))
    assert missing["cpu_model"] == "unknown" and missing["native_bf16"] == "no"
