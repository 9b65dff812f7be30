"""cuda_binary: builds a CUDA program with the toolkit's nvcc in a genrule.

Programs are linked with `-cudart shared`, so they load libcudart.so.13 at run time: NVIDIA's on
a GPU machine, tests/gpusim's on the CPU (through LD_LIBRARY_PATH). nvcc is taken from
$CUDA_HOME (default /usr/local/cuda), which .bazelrc passes into actions.
"""

def cuda_binary(
        name,
        srcs,
        hdrs = [],
        copts = [],
        linkopts = [],
        arch = "-arch=sm_80",
        visibility = None,
        tags = []):
    """`arch`: nvcc's architecture flags ("" for nvcc's default, as a plain `nvcc` build)."""
    cu = [s for s in srcs if s.endswith(".cu") or s.endswith(".cc") or s.endswith(".cpp")]
    native.genrule(
        name = name + "_nvcc",
        srcs = srcs + hdrs,
        outs = [name],
        cmd = " ".join([
            "$${CUDA_HOME:-/usr/local/cuda}/bin/nvcc -O2 -std=c++17 -cudart shared",
            arch,
            "-I. -I$(GENDIR)",
            " ".join(copts),
            " ".join(["$(location %s)" % s for s in cu]),
            "-o $@",
            " ".join(linkopts),
        ]),
        visibility = visibility,
        tags = tags,
    )
