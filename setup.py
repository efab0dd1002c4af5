"""Build torch-flashattn: the C backend, the CUDA kernels and the torch binding.

    pip install --no-build-isolation -e .        # or: python3 setup.py build_ext --inplace

The CUDA part is built whenever nvcc is found (FA_BUILD_CUDA=0 skips it). Each
CUDA file is built for the GPUs its kernels run on (CUDA_TARGETS below): the
CUDA-core kernels from Turing (sm_75) on, the sm_80 families for sm_80 and
sm_90a, the Hopper kernel for sm_90a only, and the Turing kernel as sm_75 code
plus compute_75 PTX (newer GPUs JIT it when that family is forced). sm_70
(Volta) is added to the CUDA-core kernels when nvcc still supports it (CUDA
12.x; CUDA 13 dropped it). FA_CUDA_ARCHS (e.g. "90a") narrows every file to the
listed targets; a file left with none is built for its lowest target alone, with
PTX only where the table gives it ("+ptx"): the host plans some kernels by the
device's compute capability (e.g. the decode kernel's sm_90 clusters), which an
older PTX JIT-compiled there would lack, so a GPU without code must fail loudly.
MAX_JOBS caps the parallel compile jobs.
"""
import concurrent.futures
import glob
import os
import shutil
import subprocess

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
# Each CUDA file's GPU targets (heaviest first: they start compiling first). "75+ptx": sm_75 code
# and compute_75 PTX. "70?": sm_70 where nvcc still has it. dispatch.cu holds host code only.
CUDA_TARGETS = {
    "sm90.cu": ["90a"],
    "sm90_backward.cu": ["90a"],
    "decode.cu": ["80", "90a"],
    "sm80.cu": ["80", "90a"],
    "sm80_backward.cu": ["80", "90a"],
    "fp32tc.cu": ["80", "90a"],
    "fp32.cu": ["80", "90a"],
    "decode_simt.cu": ["70?", "75", "80", "90a"],
    "simt.cu": ["70?", "75", "80", "90a"],
    "turing.cu": ["75+ptx"],
    "naive.cu": ["70?", "75", "80", "90a"],
    "dispatch.cu": ["75"],
}
# Files nvcc compiles with --split-compile (its optimizer and ptxas over several threads): sm90.cu, the
# longest by far (100 s of one core against 43 s for the next), which alone set a 16-core build's time.
# Split 2 and 8 gave the same SASS on a 2-core machine, split 1 the unsplit build's (register names
# differ in two of its 92 kernels), so at least 2 threads are asked for whatever MAX_JOBS says. A 16-core
# device build (split 16) took 77 s and passed the whole suite; its SASS was not compared.
SPLIT_COMPILE = {"sm90.cu"}
C_CUDA_SOURCES = ["csrc/cuda/device.c", "csrc/cuda/plan.c"]   # plain C (device.c: the CUDA runtime API)
BINDING = ["csrc/fa_torch.cpp"]

# --param=avoid-fma-max-bits=0: every a · b + c is one FMA at every vector width. A tuning that avoids
# FMA chains in loop reductions (GCC's for Zen 2/3 among others, as -mtune or CFLAGS may pick) does so
# for vectors up to 256 bits, which left the C backend's 8-float forms with a multiply and an add where
# its 16-float forms had an FMA: other bits. GCC 12's generic tuning builds the same object either way.
C_FLAGS = ["-std=c11", "-O3", "-DNDEBUG", "-fopenmp", "-ffp-contract=fast", "-fno-trapping-math",
           "--param=avoid-fma-max-bits=0", "-Wall", "-Wextra", "-Wno-psabi"]


def nvcc_available():
    if os.environ.get("FA_BUILD_CUDA", "1") == "0":
        return False
    return CUDA_HOME is not None and os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc"))


def nvcc_archs():
    """The compute_XX targets this nvcc can build."""
    out = subprocess.run([os.path.join(CUDA_HOME, "bin", "nvcc"), "--list-gpu-arch"], capture_output=True, text=True)
    return {line.strip()[len("compute_"):] for line in out.stdout.split() if line.startswith("compute_")}


def gencode_flags(src, have):
    """nvcc's -gencode flags for one CUDA file: its CUDA_TARGETS that nvcc has (`have`), narrowed to
    FA_CUDA_ARCHS when that is set (the file's lowest target when nothing is left)."""
    wanted = os.environ.get("FA_CUDA_ARCHS")
    wanted = set(filter(None, (a.strip() for a in wanted.replace(",", ";").split(";")))) if wanted else None
    targets = [t.rstrip("?") for t in CUDA_TARGETS[src] if not t.endswith("?") or t.rstrip("?") in have]
    def gencode(t):
        arch = t.split("+")[0]
        code = f"[sm_{arch},compute_{arch}]" if t.endswith("+ptx") else f"sm_{arch}"
        return f"-gencode=arch=compute_{arch},code={code}"
    flags = [gencode(t) for t in targets if wanted is None or t.split("+")[0] in wanted]
    return flags or [gencode(targets[0])]


NVCC_FLAGS = ["-O3", "-DNDEBUG", "-std=c++17", "-lineinfo", "-Xptxas=--warn-on-spills", "--compiler-options", "-fPIC",
              "-DFA_WITH_CUDA=1", "-Icsrc", "-Icsrc/cuda", "--expt-relaxed-constexpr",
              # as torch's extension builder passes them (the kernels use the intrinsics only)
              "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
              "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]


def compile_cuda(build_temp):
    """Starts nvcc on every CUDA file with its own targets, MAX_JOBS (default: the CPU count) at a
    time; returns the object paths and a function that waits for them (raising on a failure)."""
    have = nvcc_archs()
    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc")
    extra = ["-DFA_DECODE_TRACE"] if os.environ.get("FA_DECODE_TRACE") == "1" else []
    out_dir = os.path.join(build_temp, "csrc", "cuda")
    os.makedirs(out_dir, exist_ok=True)

    headers = glob.glob("csrc/*.h") + glob.glob("csrc/cuda/*.h") + glob.glob("csrc/cuda/*.cuh") + ["setup.py"]

    def run(src):
        obj = os.path.join(out_dir, src.replace(".cu", ".o"))
        split = [f"--split-compile={max(jobs, 2)}"] if src in SPLIT_COMPILE else []
        cmd = [nvcc] + NVCC_FLAGS + extra + split + gencode_flags(src, have) + ["-c", "csrc/cuda/" + src, "-o", obj]
        # Up to date (an in-place rebuild): the object is newer than its file and every header, and
        # was built by the same command.
        stamp = obj + ".cmd"
        if (os.path.exists(obj) and os.path.exists(stamp) and open(stamp).read() == " ".join(cmd)
                and os.path.getmtime(obj) >= max(os.path.getmtime(f) for f in headers + ["csrc/cuda/" + src])):
            return obj
        print(" ".join(cmd), flush=True)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"nvcc failed on csrc/cuda/{src}:\n{done.stdout}{done.stderr}")
        if done.stderr.strip():
            print(done.stderr, flush=True)
        with open(stamp, "w") as f:
            f.write(" ".join(cmd))
        return obj

    jobs = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(run, src) for src in CUDA_TARGETS]

    def wait():
        try:
            for f in futures:
                f.result()
        finally:
            pool.shutdown(cancel_futures=True)
    return [os.path.join(out_dir, src.replace(".cu", ".o")) for src in CUDA_TARGETS], wait


class BuildExt(BuildExtension):
    """BuildExtension compiles every non-CUDA source as C++; the C backend is
    C11, so its files go through the C compiler first and are linked in. The
    CUDA files compile meanwhile (compile_cuda: each with its own targets, which
    torch's builder cannot do) while torch's builder compiles the binding; the
    link waits for them."""

    def build_extensions(self):
        wait = None
        cuda_objects = []
        if WITH_CUDA:
            cuda_objects, wait = compile_cuda(self.build_temp)
        defines = [("FA_WITH_CUDA", "1")] if WITH_CUDA else []
        sources = C_SOURCES + (C_CUDA_SOURCES if WITH_CUDA else [])
        includes = ["csrc"] + ([os.path.join(CUDA_HOME, "include")] if WITH_CUDA else [])
        objects = self.compiler.compile(sources, output_dir=self.build_temp, macros=defines,
                                        include_dirs=includes, extra_postargs=C_FLAGS)
        for ext in self.extensions:
            ext.extra_objects = objects + cuda_objects + list(ext.extra_objects or [])
        if wait is not None:
            link = self.compiler.link_shared_object

            def link_after_cuda(*args, **kwargs):
                wait()
                return link(*args, **kwargs)
            self.compiler.link_shared_object = link_after_cuda
        try:
            super().build_extensions()
        finally:
            if wait is not None:
                wait()


WITH_CUDA = nvcc_available()
cxx_flags = ["-O3", "-DNDEBUG"]
if WITH_CUDA:
    ext = CUDAExtension(
        "torch_flashattn._C",
        BINDING,
        include_dirs=[os.path.abspath("csrc")],
        define_macros=[("FA_WITH_CUDA", "1")],
        extra_compile_args={"cxx": cxx_flags},
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
