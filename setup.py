"""Build torch-flashattn: the C backend, the CUDA kernels and the torch binding.

    pip install --no-build-isolation -e .        # or: python3 setup.py build_ext --inplace

The CUDA part is built whenever nvcc is found (FA_BUILD_CUDA=0 skips it).
FA_CUDA_ARCHS lists the GPU targets, default "80;90a" (Ampere and later, plus
Hopper's own instructions). MAX_JOBS caps the parallel compile jobs.
"""
import glob
import os
import shutil

from setuptools import setup


def find_cuda_home():
    """The CUDA toolkit root: $CUDA_HOME, else the first of nvcc's parent
    folder and the usual install folders that holds the runtime headers
    (nvcc on PATH is sometimes a wrapper script outside the toolkit)."""
    if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return os.environ.get("CUDA_HOME") or os.environ["CUDA_PATH"]
    nvcc = shutil.which("nvcc")
    candidates = [os.path.dirname(os.path.dirname(nvcc))] if nvcc else []
    candidates += ["/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    for root in candidates:
        if os.path.exists(os.path.join(root, "include", "cuda_runtime.h")) and \
                os.path.exists(os.path.join(root, "bin", "nvcc")):
            return root
    return None


if os.environ.get("FA_BUILD_CUDA", "1") != "0" and find_cuda_home():
    os.environ["CUDA_HOME"] = find_cuda_home()

from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension  # noqa: E402

C_SOURCES = ["csrc/fa_common.c", "csrc/fa_cpu.c"]
CUDA_SOURCES = ["csrc/cuda/" + f for f in ("dispatch.cu", "sm90.cu", "sm80.cu", "fp32tc.cu", "fp32.cu", "simt.cu",
                                            "naive.cu", "decode.cu", "decode_simt.cu")]
C_CUDA_SOURCES = ["csrc/cuda/device.c", "csrc/cuda/plan.c"]   # plain C (device.c: the CUDA runtime API)
BINDING = ["csrc/fa_torch.cpp"]

C_FLAGS = ["-std=c11", "-O3", "-DNDEBUG", "-fopenmp", "-ffp-contract=fast", "-fno-trapping-math",
           "-Wall", "-Wextra", "-Wno-psabi"]


def nvcc_available():
    if os.environ.get("FA_BUILD_CUDA", "1") == "0":
        return False
    return CUDA_HOME is not None and os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc"))


def gencode_flags():
    archs = os.environ.get("FA_CUDA_ARCHS", "80;90a")
    flags = []
    for arch in filter(None, (a.strip() for a in archs.replace(",", ";").split(";"))):
        flags.append(f"-gencode=arch=compute_{arch},code=sm_{arch}")
    return flags


class BuildExt(BuildExtension):
    """BuildExtension compiles every non-CUDA source as C++; the C backend is
    C11, so its files go through the C compiler first and are linked in."""

    def build_extensions(self):
        defines = [("FA_WITH_CUDA", "1")] if WITH_CUDA else []
        sources = C_SOURCES + (C_CUDA_SOURCES if WITH_CUDA else [])
        includes = ["csrc"] + ([os.path.join(CUDA_HOME, "include")] if WITH_CUDA else [])
        objects = self.compiler.compile(sources, output_dir=self.build_temp, macros=defines,
                                        include_dirs=includes, extra_postargs=C_FLAGS)
        for ext in self.extensions:
            ext.extra_objects = objects + list(ext.extra_objects or [])
        super().build_extensions()


WITH_CUDA = nvcc_available()
cxx_flags = ["-O3", "-DNDEBUG"]
if WITH_CUDA:
    ext = CUDAExtension(
        "torch_flashattn._C",
        BINDING + CUDA_SOURCES,
        include_dirs=[os.path.abspath("csrc")],
        define_macros=[("FA_WITH_CUDA", "1")],
        extra_compile_args={
            "cxx": cxx_flags,
            "nvcc": ["-O3", "-DNDEBUG", "-lineinfo", "-Xptxas=--warn-on-spills"] + gencode_flags()
                    + (["-DFA_DECODE_TRACE"] if os.environ.get("FA_DECODE_TRACE") == "1" else []),
        },
        extra_link_args=["-fopenmp"],
    )
else:
    ext = CppExtension(
        "torch_flashattn._C",
        BINDING,
        include_dirs=[os.path.abspath("csrc")],
        extra_compile_args={"cxx": cxx_flags},
        extra_link_args=["-fopenmp"],
    )

setup(
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt.with_options(use_ninja=True)},
)
