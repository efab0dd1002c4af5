"""The C interface without torch: fa.h compiles as C and C++, a plain C program built with gcc
calls fa_forward_cpu correctly, and the CUDA backend's planning rules hold (tests/c/test_plan.c)."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")
HERE = os.path.join(ROOT, "tests", "c")


def compile_and_run(cmd, exe):
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, f"{' '.join(cmd)}\n{build.stderr}"
    run = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    return run


SANITIZE = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("flags", [["-O2"], SANITIZE], ids=["O2", "asan-ubsan"])
def test_plain_c_program(tmp_path, flags):
    """The C backend through fa.h alone, also under AddressSanitizer and UBSan: any invalid
    access or undefined behaviour aborts the program."""
    exe = str(tmp_path / "test_capi")
    cmd = ["gcc", "-std=c11", *flags, "-Wall", "-Wextra", "-Werror", "-Wno-psabi", "-fopenmp", f"-I{CSRC}",
           os.path.join(HERE, "test_capi.c"), os.path.join(CSRC, "fa_cpu.c"), os.path.join(CSRC, "fa_common.c"),
           "-lm", "-o", exe]
    run = compile_and_run(cmd, exe)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout and run.stdout.count("ok") >= 30, run.stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("flags", [["-O2"], SANITIZE], ids=["O2", "asan-ubsan"])
def test_plan(tmp_path, flags):
    """The CUDA backend's host planning (csrc/cuda/plan.c) is plain C: its rules, checked without a
    GPU (tests/c/test_plan.c)."""
    exe = str(tmp_path / "test_plan")
    cmd = ["gcc", "-std=c11", *flags, "-Wall", "-Wextra", "-Werror", f"-I{CSRC}", f"-I{os.path.join(CSRC, 'cuda')}",
           os.path.join(HERE, "test_plan.c"), os.path.join(CSRC, "cuda", "plan.c"), os.path.join(CSRC, "fa_common.c"),
           "-lm", "-o", exe]
    run = compile_and_run(cmd, exe)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout and "135 checks, 0 failed" in run.stdout, run.stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("std", ["c99", "c11", "c17"])
def test_header_is_c(tmp_path, std):
    src = tmp_path / "h.c"
    src.write_text('#include "fa.h"\nint main(void) { fa_params p = {0}; return fa_check_params(&p) == FA_OK; }\n')
    res = subprocess.run(["gcc", f"-std={std}", "-pedantic", "-Wall", "-Werror", "-fsyntax-only", f"-I{CSRC}",
                          str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_header_is_cxx(tmp_path):
    exe = str(tmp_path / "header_cxx")
    # The library is C: build it with gcc and link it into the C++ program.
    obj = str(tmp_path / "fa_common.o")
    res = subprocess.run(["gcc", "-std=c11", "-c", f"-I{CSRC}", os.path.join(CSRC, "fa_common.c"), "-o", obj],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    stub = str(tmp_path / "cpu_stub.o")   # fa_forward_cpu's symbol, without OpenMP
    res = subprocess.run(["gcc", "-std=c11", "-c", "-Wno-psabi", f"-I{CSRC}", os.path.join(CSRC, "fa_cpu.c"),
                          "-o", stub], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    cmd = ["g++", "-std=c++17", "-pedantic", "-Wall", "-Werror", f"-I{CSRC}", os.path.join(HERE, "header_cxx.cpp"),
           obj, stub, "-lm", "-o", exe]
    run = compile_and_run(cmd, exe)
    assert run.returncode == 0, run.stdout + run.stderr
