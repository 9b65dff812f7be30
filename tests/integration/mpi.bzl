"""The MPI integration tests: a plain MPI program, built with Open MPI's compiler wrapper, and
the cc_test that runs it under mpirun with the agent and checks what it recorded."""

def mpi_program(name, src = None, copts = "", testonly = 1):
    """`name`, built from `src` (default NAME.cc) and mpi_program.h with mpicxx.

    Bazel rejects copts that point at /usr/lib/.../include, so //third_party:mpi's -isystem
    cannot reach dependents: the wrapper compiles the program instead.
    """
    src = src or name + ".cc"
    native.genrule(
        name = name + "_build",
        testonly = testonly,
        srcs = [src, "mpi_program.h"],
        outs = [name],
        cmd = "mpicxx -O2 -std=c++17 %s -I. $(location %s) -o $@" % (copts, src),
    )

def mpi_program_test(name, program, copts = "", extra_data = [], tags = ["exclusive"]):
    """mpi_program(`program`) and `name`, the test (NAME.cc) that runs it."""
    mpi_program(program, copts = copts)
    native.cc_test(
        name = name,
        size = "medium",
        srcs = [name + ".cc"],
        data = [
            ":" + program,
            "//agent:libprofagent.so",
            "//analyzer:profanalyze",
        ] + extra_data,
        tags = tags,
        deps = [
            ":mpi_testutil",
            "//third_party:catch2_main",
            "//third_party:json",
        ],
    )
