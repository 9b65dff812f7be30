"""Exposes the CUDA toolkit (headers, nvcc) as @cuda. Location: $CUDA_HOME, else /usr/local/cuda."""

def _cuda_repo_impl(ctx):
    root = ctx.os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if not ctx.path(root + "/include/cuda_runtime_api.h").exists:
        fail("CUDA toolkit not found at %s (set CUDA_HOME); scripts/setup.sh explains" % root)
    ctx.symlink(root + "/include", "include")
    ctx.symlink(root + "/bin", "bin")
    ctx.symlink(ctx.attr.build_file, "BUILD.bazel")

cuda_repository = repository_rule(
    implementation = _cuda_repo_impl,
    attrs = {"build_file": attr.label(allow_single_file = True)},
    environ = ["CUDA_HOME"],
    local = True,
)
